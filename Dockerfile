# tally's container image: the static binary alone, on scratch.
#
# The binary is built on the host, not in a build stage, so that the image
# needs no base image from a registry. `make image` builds
# bin/tally-linux-$(IMAGE_ARCH) (CGO_ENABLED=0, -trimpath, -ldflags "-s -w")
# and then this file with buildah. Any builder works the same on that output:
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o bin/tally-linux-amd64 .
#   docker build -t tally:dev .
#
# No CA certificates: tally's only TLS client connections go to the API
# server, which it trusts through the service account's CA
# (/var/run/secrets/kubernetes.io/serviceaccount/ca.crt) or the CA in a
# kubeconfig, never through the system pool. It serves its webhooks with a
# certificate it makes itself or that cert-manager mounts.
FROM scratch

# buildah bud --platform and docker buildx set all three; TARGETPLATFORM
# is declared only so that buildah does not warn that it went unused.
ARG TARGETPLATFORM
ARG TARGETOS=linux
ARG TARGETARCH=amd64
COPY bin/tally-${TARGETOS}-${TARGETARCH} /tally

# A numeric non-root user and group (there is no /etc/passwd to name one),
# the same as deploy/base/deployment.yaml's runAsUser and runAsGroup, so
# that runAsNonRoot can check it. HOME is set because with no /etc/passwd
# and no cgo the client cannot find a home directory otherwise, and then
# fails before connecting whenever $KUBECONFIG is given ("could not get
# current user"), as for `tally status` run in the image.
USER 65532:65532
ENV HOME=/

# `docker run IMAGE` serves; `docker run IMAGE --help` prints serve's flags
# (tally runs serve when the first argument is a flag); `docker run IMAGE
# status` or `check-config FILE` run the other commands.
ENTRYPOINT ["/tally"]
CMD ["serve"]
