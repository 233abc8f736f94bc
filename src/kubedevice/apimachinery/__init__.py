"""Kubernetes' API-machinery rules in one place: field errors and paths, name and label formats,
object metadata, with Kubernetes' own messages, release by release.

Each module mirrors one upstream package, so a rule is found where Kubernetes keeps it:

- :mod:`.field`: ``k8s.io/apimachinery/pkg/util/validation/field`` (``Path``, ``ErrorList``,
  the error types and how the API server prints them);
- :mod:`.validation`: ``k8s.io/apimachinery/pkg/util/validation`` (``IsDNS1123Label``,
  ``IsDNS1123Subdomain``, ``IsQualifiedName``, ``IsValidLabelValue``, ``IsCIdentifier``: lengths
  in "characters");
- :mod:`.content`: ``k8s.io/apimachinery/pkg/api/validate/content`` (``IsLabelKey``,
  ``IsLabelValue``, ...: lengths in "bytes"; what ``IsQualifiedName`` is from apimachinery v0.35);
- :mod:`.strfmt`: ``k8s.io/apimachinery/pkg/api/validate/strfmt.go`` (the declarative formats:
  extended resource names, resource qualified names, caseless long names);
- :mod:`.meta`: ``k8s.io/apimachinery/pkg/api/validation`` (``ValidateObjectMeta``, labels,
  annotations, generated names) and ``ValidateTemplateObjectMeta``;
- :mod:`.core`: the rules of ``k8s.io/kubernetes/pkg/apis/core`` that other APIs reuse (node
  selectors, CSI driver names, ``IsExtendedResourceName``).

Every user of a Kubernetes name rule calls these, so the DRA tools (:mod:`kubedevice.dra.validation`)
and the config (:mod:`kubedevice.sources.schema`) say the same thing about the same name. Where a
release changed a rule or its wording, the function takes the release (:mod:`kubedevice.releases`).
"""
