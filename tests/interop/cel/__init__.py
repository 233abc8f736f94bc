"""Kubernetes' CEL as a Go program (main.go), how to build it (celgo) and the seeded corpus the
differential tests send through it and through our engine (celcorpus)."""
