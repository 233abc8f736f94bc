"""Tests of the generic CEL engine, kubedevice.cel (as k8s.io/apiserver/pkg/cel), one module per
engine module or library; DRA's environment (the ``device`` variable, selectors) is tested in
tests/dra."""
