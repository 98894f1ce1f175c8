# The operator image, for those who build with Docker:
#
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=$(git describe --tags --dirty 2>/dev/null || echo dev) -t ghcr.io/kdag-dev/kdag:<version> .
#
# `make image` builds the same image without a container runtime (internal/release): the static
# manager at /manager, user 65532:65532, entrypoint /manager. A test (internal/release
# TestDockerfile_MatchesImage) keeps this file's USER, ENTRYPOINT and binary path equal to it.
# This one sits on distroless's static base, which adds CA certificates, /etc/passwd and tzdata.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager .

FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/kdag-dev/kdag" \
      org.opencontainers.image.title="kdag" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
