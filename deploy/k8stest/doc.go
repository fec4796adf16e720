// Package k8stest checks the manifests in deploy/kubernetes without a
// cluster: every document decoded strictly into the Kubernetes API types,
// the kustomization built with kustomize's own library, and the
// containers' command lines, after that build, run against each other on
// loopback. It is a module of its own so that the Kubernetes libraries
// stay out of bulkmove's go.mod; `make test` runs it. It has no code but
// its tests.
package k8stest
