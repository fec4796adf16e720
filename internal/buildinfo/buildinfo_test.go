package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
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
		{"go install @latest, untagged", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-0123456789ab"}}, "", "", "v0.0.0-20261202134957-0123456789ab", "0123456789ab"},
		{"go install after a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261202134957-0123456789ab"}}, "", "", "v1.2.4-0.20261202134957-0123456789ab", "0123456789ab"},
		{"checkout, clean", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-0123456789ab"}, Settings: vcs("false")}, "", "", Dev, "0123456789ab"},
		{"checkout, modified", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202134957-0123456789ab+dirty"}, Settings: vcs("true")}, "", "", Dev, "0123456789ab-dirty"},
		{"checkout at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")}, "", "", "v1.2.3", "0123456789ab"},
		{"checkout at a tag, modified", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3+dirty"}, Settings: vcs("true")}, "", "", Dev, "0123456789ab-dirty"},
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
