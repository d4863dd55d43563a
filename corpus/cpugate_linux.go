package corpus

import (
	"github.com/prometheus/procfs"
)

// readCPU reads the machine's CPU times (/proc/stat) and the threads' (their
// /proc/self/task/<tid>/stat) with prometheus/procfs, in seconds. A thread that cannot be
// read (it ended) is left out and counted so.
func readCPU(tids []int) (cpuSample, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return cpuSample{}, err
	}
	st, err := fs.Stat()
	if err != nil {
		return cpuSample{}, err
	}
	c := st.CPUTotal // guest time is inside user
	s := cpuSample{
		total: c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal,
		idle:  c.Idle + c.Iowait,
		cpus:  len(st.CPU),
	}
	self, err := fs.Self()
	if err != nil {
		return cpuSample{}, err
	}
	for _, tid := range tids {
		t, err := self.Thread(tid)
		if err != nil {
			continue
		}
		ts, err := t.Stat()
		if err != nil {
			continue
		}
		s.workers += ts.CPUTime()
		s.threads++
	}
	return s, nil
}

// gateReader is the CPU reader of this platform.
var gateReader = readCPU
