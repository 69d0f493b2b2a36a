package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses a memory size: "24GiB", "23.4GB", "24G" (binary), "24576MiB", "512M", or plain bytes.
// Decimal units (KB, MB, GB, TB) are powers of 1000; binary ones (KiB…TiB, and the bare K/M/G/T that memory flags
// conventionally mean) powers of 1024.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit, e.g. 24GiB or 23.4GB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
	}
	b := v * mult
	if b >= 1<<63 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return uint64(b), nil
}

// mib formats bytes as MiB with thousands separators, the unit llama.cpp's logs and nvidia-smi use.
func mib(b uint64) string { return group(int64((b+MiB/2)/MiB)) + " MiB" }

func group(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
