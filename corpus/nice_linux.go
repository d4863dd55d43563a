package corpus

import (
	"runtime"
	"syscall"
)

// lowerThreadPriority pins the calling goroutine to its OS thread for good and sets that
// thread's nice value (Linux sets it per thread). The goroutine must never unlock: when it
// exits, the runtime ends the thread instead of reusing it at the lower priority.
func lowerThreadPriority(nice int) error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
