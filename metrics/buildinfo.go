package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmove/bulkmove/internal/buildinfo"
)

// buildInfo is bulkmove_build_info{version,revision,goversion}, always 1:
// which bulkmove a dashboard is looking at, down to the commit.
func buildInfo(version string) prometheus.Collector {
	in := buildinfo.Get()
	bi := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bulkmove_build_info",
		Help: "Version of bulkmove, the source revision it was built from, and the Go version; always 1.",
	}, []string{"version", "revision", "goversion"})
	bi.WithLabelValues(version, in.Revision, in.GoVersion).Set(1)
	return bi
}
