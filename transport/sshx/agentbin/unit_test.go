package agentbin

import (
	"strings"
	"testing"
)

// TestCheckCacheStatFormats: GNU's and BSD's stat lines are read alike.
func TestCheckCacheStatFormats(t *testing.T) {
	for line, want := range map[string]statInfo{
		"0|700|directory|65024|12|4096|1|1":         {uid: "0", mode: "700", rawType: "directory", typ: "dir"},
		"501|755|Directory|16777220|12|64|1|1":      {uid: "501", mode: "755", rawType: "Directory", typ: "dir"},
		"501|755|Regular File|16777220|12|64|1|1":   {uid: "501", mode: "755", rawType: "Regular File", typ: "file"},
		"0|777|symbolic link|65024|12|4|1|1":        {uid: "0", mode: "777", rawType: "symbolic link", typ: "symlink", othersWrite: true},
		"1000|2775|directory|65024|12|4096|1|1":     {uid: "1000", mode: "2775", rawType: "directory", typ: "dir", othersWrite: true},
		"1000|1777|directory|65024|12|4096|1|1":     {uid: "1000", mode: "1777", rawType: "directory", typ: "dir", othersWrite: true},
		"1000|640|regular empty file|65024|1|0|1|1": {uid: "1000", mode: "640", rawType: "regular empty file", typ: "file"},
		"garbage": {uid: "garbage", typ: "other", othersWrite: true},
	} {
		if got := statFields(line); got != want {
			t.Errorf("statFields(%q) = %+v, want %+v", line, got, want)
		}
	}
	home := "/home/u"
	kv := map[string]string{"uid": "501", "d0": "501|755|Directory|1|2|3|4|5", "d1": "501|700|Directory|1|2|3|4|5",
		"d2": "501|775|Directory|1|2|3|4|5", "d3": "none"}
	cs := checkCache(kv, home, "v1", "abc")
	if cs.refuse != "" || len(cs.repairDirs) != 1 || cs.repairDirs[0] != "/home/u/.cache/bulkmove" ||
		len(cs.missing) != 1 || cs.missing[0] != "/home/u/.cache/bulkmove/v1" || cs.good {
		t.Errorf("checkCache = %+v", cs)
	}
	kv["d1"] = "502|700|Directory|1|2|3|4|5"
	if cs := checkCache(kv, home, "v1", "abc"); !strings.Contains(cs.refuse, "/home/u/.cache is owned by uid 502") {
		t.Errorf("checkCache with ~/.cache of another user = %+v", cs)
	}
	// Another push made ~/.cache/bulkmove/v1 between the stats of ~/.cache
	// and its children: the chain counts as missing (fixCache makes or finds
	// each and checks its own report), not as a refusal.
	raced := map[string]string{"uid": "501", "d0": "501|755|Directory|1|2|3|4|5", "d1": "none",
		"d2": "501|700|Directory|1|2|3|4|5", "d3": "501|700|Directory|1|2|3|4|5"}
	if cs := checkCache(raced, home, "v1", "abc"); cs.refuse != "" || len(cs.missing) != 3 || cs.missing[0] != "/home/u/.cache" || cs.good {
		t.Errorf("checkCache with ~/.cache made by another push between the stats = %+v", cs)
	}
	kv["d1"], kv["d0"] = "501|700|Directory|1|2|3|4|5", "501|775|Directory|1|2|3|4|5"
	if cs := checkCache(kv, home, "v1", "abc"); !strings.Contains(cs.refuse, "/home/u is writable by group or others (mode 775)") {
		t.Errorf("checkCache with a group-writable home = %+v", cs)
	}
}

func TestGoPlatform(t *testing.T) {
	for in, want := range map[string]string{
		"Linux x86_64":   "linux/amd64",
		"Linux aarch64":  "linux/arm64",
		"Darwin arm64":   "darwin/arm64",
		"Linux armv7l":   "linux/arm",
		"FreeBSD amd64":  "freebsd/amd64",
		"Linux ppc64le":  "linux/ppc64le",
		"SunOS i86pc":    "solaris/i86pc",
		"MINGW64_NT x86": "mingw64_nt/x86",
	} {
		os, arch, _ := goPlatform(in)
		if got := os + "/" + arch; got != want {
			t.Errorf("goPlatform(%q) = %s, want %s", in, got, want)
		}
	}
}
