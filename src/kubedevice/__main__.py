"""``python -m kubedevice``."""

from .cli import main

main()
