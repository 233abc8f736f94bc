"""A CEL engine with Kubernetes' semantics: the base environment of k8s.io/apiserver/pkg/cel.

The parser, checker (``engine``), cost estimator, runtime values, operators and macros, and one
module per library (lists, sets, strings/format, regex, ip, cidr, urls, quantity, semver,
timestamps, formats, type values). Environments that declare variables, such as DRA's
(kubedevice.dra.cel), build on it through ``engine.Declarations``.

Importing the package completes the base environment: each library module registers its
functions and static costs when imported, and the operators and macros register with the
compiler (those modules build on ``engine``, so the engine cannot import them itself).
"""

from __future__ import annotations

from . import cidr, engine, formats, ip, lists, operators, sets, strformat, timestamps, typevalues, urls
from .macros import compile_macro

LIBRARIES = (cidr, formats, ip, lists, sets, strformat, timestamps, typevalues, urls)
engine.SPECIAL.update(operators.SPECIAL)
engine.SPECIAL["@macro"] = compile_macro
