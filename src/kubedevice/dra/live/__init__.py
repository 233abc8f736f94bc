"""DRA questions answered on the live cluster: the objects read from the API server, not files.

``cluster`` reads what the commands need (one LIST per kind from the API server's watch cache,
the served ``resource.k8s.io`` version, the server's release), ``nodefilters`` the scheduler's
node filters other than DRA that are cheap to judge exactly, ``podexplain`` why a pod fits or
not on every node (grouped), ``available`` what is free per node and pool and who holds the rest,
``cli`` the command-line side of ``kubedevice dra`` without FILEs, ``kubectl`` the ``kubectl dra``
plugin.
"""
