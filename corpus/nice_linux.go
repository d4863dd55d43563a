package corpus

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowerThreadPriority pins the calling goroutine to its OS thread for good and lowers that
// thread's priority (Linux sets both per thread): nice 1..19 sets its nice value, and
// IdleNice puts it in SCHED_IDLE, below every nice level, so it runs only on CPU time no
// other thread wants. The goroutine must never unlock: when it exits, the runtime ends the
// thread instead of reusing it at the lower priority.
func lowerThreadPriority(nice int) error {
	runtime.LockOSThread()
	if nice >= IdleNice {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19); err != nil {
			return err
		}
		return unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
	}
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}

// threadID is the calling thread's ID (the goroutine must be locked to it).
func threadID() int { return unix.Gettid() }
