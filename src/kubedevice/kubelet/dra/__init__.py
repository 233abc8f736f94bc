"""The kubelet's DRA side."""
