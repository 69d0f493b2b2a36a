package vram

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// SystemRAM describes this machine's memory as a device to plan for, from /proc/meminfo: what `visor plan`
// shows when there is no GPU, since llama-server then runs everything on the CPU.
func SystemRAM() (GPU, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return GPU{}, fmt.Errorf("vram: system memory: %w", err)
	}
	defer f.Close()
	return ParseMeminfo(f)
}

// ParseMeminfo reads MemTotal and MemAvailable (the kernel's estimate of what can be allocated without
// swapping, page cache included) from /proc/meminfo's format.
func ParseMeminfo(r io.Reader) (GPU, error) {
	g := GPU{Index: -1, Name: "CPU (system RAM)", Source: "meminfo"}
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && strings.EqualFold(fields[1], "kB") {
			n *= 1024
		}
		switch k {
		case "MemTotal":
			g.Total, haveTotal = n, true
		case "MemAvailable":
			g.Free, haveAvail = n, true
		}
	}
	if err := sc.Err(); err != nil {
		return GPU{}, fmt.Errorf("vram: reading meminfo: %w", err)
	}
	if !haveTotal || !haveAvail {
		return GPU{}, fmt.Errorf("vram: meminfo lacks MemTotal or MemAvailable: pass --gpu SIZE to plan for a given size")
	}
	g.Used = g.Total - min(g.Free, g.Total)
	return g, nil
}
