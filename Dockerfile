# The bulkmove image: a static binary on distroless (no shell, no libc).
# deploy/kubernetes/ runs it as `bulkmove serve` (the receiver) and as the
# sharded senders. Build from the repository root:
#   docker build -t registry.example.com/bulkmove:0.1.0 --build-arg VERSION=0.1.0 .
# The remote-agent cache and the protocol check key on the version, so give
# every image its own.

FROM golang:1.26 AS build
ARG VERSION=0.1.0-dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" \
    -o /out/bulkmove ./cmd/bulkmove \
 && /out/bulkmove --version

# static-debian12 runs as root by default: the receiver keeps numeric owners
# only as root, and a sender reads files of every owner. It has CA
# certificates and /etc/passwd, nothing else.
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/bulkmove /usr/local/bin/bulkmove
ENTRYPOINT ["/usr/local/bin/bulkmove"]
CMD ["--help"]
