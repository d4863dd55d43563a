//go:build !linux

package corpus

import "errors"

// lowerThreadPriority is not supported here: workers run at the process's priority.
func lowerThreadPriority(int) error {
	return errors.New("thread priorities are supported on Linux only")
}

func threadID() int { return 0 }
