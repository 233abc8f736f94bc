"""The kubelet's PodResources API from the node's side: which container holds which device.

``model`` is the plain data (and :func:`~.model.holders`), ``client`` reads a kubelet's socket,
``attribution`` keeps the daemons' per-device metrics attributed to pods. Nothing is imported
here, so that :mod:`kubedevice.api.convert` can import the model without a cycle.
"""
