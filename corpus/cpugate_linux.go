package corpus

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// readCPU reads the machine's CPU times from /proc/stat and the threads' from
// /proc/self/task/<tid>/stat (both in clock ticks). A thread that cannot be read (it ended)
// is left out and counted so.
func readCPU(tids []int) (cpuSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	s, err := parseProcStat(b)
	if err != nil {
		return cpuSample{}, err
	}
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
		if err != nil {
			continue
		}
		t, err := parseTaskTicks(b)
		if err != nil {
			return cpuSample{}, err
		}
		s.workers += t
		s.threads++
	}
	return s, nil
}

// gateReader is the CPU reader of this platform.
var gateReader = readCPU

// parseProcStat reads the "cpu" line (user nice system idle iowait irq softirq steal ...):
// total is the sum of the first eight (guest time is inside user), idle is idle + iowait;
// cpus counts the "cpuN" lines.
func parseProcStat(b []byte) (cpuSample, error) {
	var s cpuSample
	found := false
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		if len(f[0]) > 3 {
			s.cpus++
			continue
		}
		if len(f) < 6 {
			return s, fmt.Errorf("corpus: /proc/stat: short cpu line %q", bytes.TrimSpace(line))
		}
		for i := 1; i < min(len(f), 9); i++ {
			v, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return s, fmt.Errorf("corpus: /proc/stat: %w", err)
			}
			s.total += v
			if i == 4 || i == 5 {
				s.idle += v
			}
		}
		found = true
	}
	if !found {
		return s, fmt.Errorf("corpus: /proc/stat has no cpu line")
	}
	return s, nil
}

// parseTaskTicks returns utime + stime of a /proc/<pid>/task/<tid>/stat line: fields 14
// and 15, counted after the command name's closing parenthesis (the name may hold spaces
// and parentheses).
func parseTaskTicks(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("corpus: task stat without a command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("corpus: task stat has %d fields after the name", len(f))
	}
	var t uint64
	for _, x := range f[11:13] {
		v, err := strconv.ParseUint(string(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("corpus: task stat: %w", err)
		}
		t += v
	}
	return t, nil
}
