from kubedevice.dra.models import load_file
from kubedevice.dra.validation import validate
from kubedevice.dra.explain import explain
from kubedevice.dra.structured import Node, allocate
from kubedevice.dra.slices import slices_for
