package vram

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// writeDevices renders a multi-device plan's GPUs and each placement's per-device budget (MiB): one row per
// mode and device, one column per component.
func (r Result) writeDevices(ew *errWriter) error {
	if len(r.Devices) < 2 {
		return nil
	}
	ew.printf("\ndevices   ")
	for i, d := range r.Devices {
		sep := "; "
		if i == len(r.Devices)-1 {
			sep = "\n"
		}
		ew.printf(" %s = %s (%s): %s free%s", d.Name, d.GPU.Name, d.GPU.Source, mib(d.GPU.Free), sep)
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range r.Modes {
		if len(p.Devices) < 2 {
			continue
		}
		for _, d := range p.Devices {
			for _, c := range d.Components {
				if !seen[c.Name] {
					seen[c.Name] = true
					names = append(names, c.Name)
				}
			}
		}
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row(append(append([]string{"MiB per device", "device", "blocks"}, names...), "total", "headroom", "fits", "max ctx")...)
	for _, p := range r.Modes {
		if len(p.Devices) < 2 {
			continue // a mode pinned to one card: the table above is its budget
		}
		for _, d := range p.Devices {
			blocks := "-"
			if d.Layers[1] > d.Layers[0] {
				blocks = fmt.Sprintf("%d–%d", d.Layers[0], d.Layers[1]-1)
				if d.Output {
					blocks += "+out"
				}
			}
			cells := []string{string(p.Mode), d.Device, blocks}
			for _, n := range names {
				cell := "-"
				for _, c := range d.Components {
					if c.Name == n {
						cell = group(int64((c.Bytes + MiB/2) / MiB))
					}
				}
				cells = append(cells, cell)
			}
			fits := "no"
			if d.Fits {
				fits = "yes"
			}
			row(append(cells, group(int64((d.Total+MiB/2)/MiB)), group(d.Headroom/MiB), fits, group(int64(d.MaxCtx)))...)
		}
	}
	return tw.Flush()
}
