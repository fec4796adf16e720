package hostcpu

import "testing"

func TestBusySince(t *testing.T) {
	a, ok := Read()
	if !ok {
		t.Skip("no /proc/stat")
	}
	if a.Total == 0 || a.Idle > a.Total {
		t.Fatalf("snapshot %+v", a)
	}
	idle := Snapshot{Idle: a.Idle + 90, Total: a.Total + 100}
	busy := Snapshot{Idle: a.Idle + 5, Total: a.Total + 100}
	switch {
	case idle.BusySince(a, 0.85):
		t.Error("10% busy counted as 85% busy")
	case !busy.BusySince(a, 0.85):
		t.Error("95% busy not counted as 85% busy")
	case a.BusySince(a, 0):
		t.Error("no time passed, and busy")
	case busy.BusySince(Snapshot{}, 0):
		t.Error("busy since the zero snapshot")
	}
}
