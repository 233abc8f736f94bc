"""What ``kubedevice serve`` is on a node, beside the plugins it serves.

``daemon`` (the device-plugin daemon: plugins from the config, probes, metrics, signals),
``reload`` (SIGHUP and config-file changes applied live), ``owner`` (the owning DaemonSet's
watch: CDI specs and the features file removed on uninstall only), ``features`` (the Node
Feature Discovery file of ``--features-file``) and ``memory`` (malloc arenas and the heap trim,
shared with the DRA driver's daemon).
"""
