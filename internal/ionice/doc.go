// Package ionice lowers the process's claim on the disks and the CPUs, so
// that a long move leaves room for the machine's other work: SetIdle and
// SetBestEffort set the I/O scheduling class (as ionice(1) does), SetNice
// the CPU nice value (as renice(1) does).
//
// On Linux both are properties of a thread, not of a process: the system
// calls ioprio_set and setpriority, given who 0, change the calling thread
// only (given the process id, only the main thread). A Go program runs on
// several threads and moves goroutines between them, so these functions
// set every thread listed in /proc/self/task. A thread created later
// starts with the class and nice value of the thread that creates it,
// which in a Go program is one of those already set: call them early in
// main, before the work starts, and the whole process, threads to come
// included, runs with the new values.
//
// The I/O class matters only to an I/O scheduler that honours it (BFQ,
// and CFQ on old kernels); with "none" or mq-deadline it does little.
//
// On other systems every function returns an error that wraps
// errors.ErrUnsupported.
package ionice

// The I/O scheduling classes, as Get reports them.
const (
	// ClassNone: no class set; the kernel derives best effort at level
	// (nice+20)/5 from the CPU nice value.
	ClassNone = 0
	// ClassRealtime: served first, at levels 0 (highest) to 7; setting it
	// takes privilege, and this package does not.
	ClassRealtime = 1
	// ClassBestEffort: the default, at levels 0 (highest) to 7.
	ClassBestEffort = 2
	// ClassIdle: served only when no other process wants the disk.
	ClassIdle = 3
)
