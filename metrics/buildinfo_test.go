package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkmove/bulkmove/internal/buildinfo"
)

// TestBuildInfo: the job's and the receiver's registries carry
// bulkmove_build_info with the version, revision and Go version.
func TestBuildInfo(t *testing.T) {
	in := buildinfo.Get()
	want := `
# HELP bulkmove_build_info Version of bulkmove, the source revision it was built from, and the Go version; always 1.
# TYPE bulkmove_build_info gauge
bulkmove_build_info{goversion="` + in.GoVersion + `",revision="` + in.Revision + `",version="9.9.9"} 1
`
	var r Receiver
	for name, reg := range map[string]prometheus.Gatherer{"job": NewJob(1).Registry("9.9.9"), "receiver": r.Registry("9.9.9")} {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkmove_build_info"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
