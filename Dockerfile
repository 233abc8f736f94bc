# syntax=docker/dockerfile:1
# kubedevice node daemon. scripts/image.sh builds the same image without a Docker engine
# (debootstrap + umoci); keep the two in step.
#   base     Debian slim + Debian's python3 and pci.ids (the PCI ID database for hosts without
#            one: $KUBEDEVICE_PCI_IDS): what both later stages share
#   build    base + python3-venv: a virtualenv with requirements/run.txt and the kubedevice wheel,
#            pip and setuptools removed
#   runtime  base + that virtualenv only, so no pip, wheel cache or build tool ships
# Every dependency has manylinux wheels (amd64 and arm64), so no stage needs a compiler.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS base
RUN apt-get update \
 && apt-get install --yes --no-install-recommends python3 pci.ids \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*

FROM base AS build
RUN apt-get update \
 && apt-get install --yes --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/kubedevice
WORKDIR /src
COPY pyproject.toml README.md MANIFEST.in ./
COPY requirements ./requirements
COPY src ./src
# The locked runtime set (hash-checked, with the pinned setuptools), the wheel built from these
# sources, then drop the installers: the runtime never installs anything.
RUN /opt/kubedevice/bin/pip install --no-compile --require-hashes -r requirements/run.txt \
 && /opt/kubedevice/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheel . \
 && /opt/kubedevice/bin/pip install --no-compile --no-deps /wheel/kubedevice-*.whl \
 && /opt/kubedevice/bin/pip uninstall --yes pip setuptools \
 && /opt/kubedevice/bin/python -m compileall -q -j 0 /opt/kubedevice

FROM base AS runtime
LABEL org.opencontainers.image.title="kubedevice" \
      org.opencontainers.image.description="Config-driven Kubernetes device plugin daemon" \
      org.opencontainers.image.licenses="Apache-2.0"
# Same base and path as the build stage, so the virtualenv's interpreter link stays valid.
COPY --from=build /opt/kubedevice /opt/kubedevice
# Byte code is compiled at build time; the root filesystem is read-only in the DaemonSet.
ENV PATH=/opt/kubedevice/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KUBEDEVICE_PCI_IDS=/usr/share/misc/pci.ids
# Non-root by default (kubedevice check, the simulator, demos). The DaemonSet runs it as
# uid 0 with every capability dropped, because the kubelet's device-plugin directory and
# kubelet.sock belong to root.
USER 65532:65532
EXPOSE 9500
ENTRYPOINT ["kubedevice"]
CMD ["serve", "--config", "/etc/kubedevice/config.yaml", "--host-root", "/host", "--metrics-address", ":9500", "--log-format", "json"]
