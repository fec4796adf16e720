package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	const rev = "60950d5125e7d6ed477ec1b51c00889a1a6e2c93"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name         string
		bi           *debug.BuildInfo
		ldVer, ldRev string
		ver, wantRev string
	}{
		{"no build info", nil, "", "", Dev, Unknown},
		{"go test or -buildvcs=false", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", Dev, Unknown},
		{"go install @v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "", "", "v1.2.3", Unknown},
		{"go install @latest, untagged", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-60950d5125e7"}}, "", "", "v0.0.0-20261202134957-60950d5125e7", "60950d5125e7"},
		{"go install after a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261202134957-60950d5125e7"}}, "", "", "v1.2.4-0.20261202134957-60950d5125e7", "60950d5125e7"},
		{"checkout, clean", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-60950d5125e7"}, Settings: vcs("false")}, "", "", Dev, "60950d5125e7"},
		{"checkout, modified", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-60950d5125e7+dirty"}, Settings: vcs("true")}, "", "", Dev, "60950d5125e7-dirty"},
		{"checkout at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")}, "", "", "v1.2.3", "60950d5125e7"},
		{"checkout at a tag, modified", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3+dirty"}, Settings: vcs("true")}, "", "", Dev, "60950d5125e7-dirty"},
		{"packager's -X", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "1.2.3-1", "deadbeef", "1.2.3-1", "deadbeef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := from(tc.bi, tc.ldVer, tc.ldRev)
			if got.Version != tc.ver || got.Revision != tc.wantRev {
				t.Errorf("version %q revision %q, want %q %q", got.Version, got.Revision, tc.ver, tc.wantRev)
			}
			if got.GoVersion == "" || got.Platform == "" {
				t.Errorf("Go version %q, platform %q: empty", got.GoVersion, got.Platform)
			}
		})
	}
}
