package vram

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable renders the plan for a terminal: one column per mode, one row per component (MiB), then the verdict
// and the llama-server arguments of each mode.
func (r Result) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	m := r.Model
	ew.printf("model      %s (%s): %.2f B params, %s of weights, %d layers (%d attention, %d recurrent, %d MTP)\n",
		nameOr(m), m.Arch, float64(m.Params)/1e9, mib(m.WeightBytes), m.Layers, len(m.Attn), m.RecurrentLayers, m.NextNLayers)
	if p := r.Projector; p != nil {
		pr := p.Projector
		if pr.Dynamic {
			ew.printf("projector  %s (%s): %s, patch %d × merge %d, images up to %.1f MP = %d tokens (1080p %d, 1440p %d); "+
				"encoder sized for %d tokens\n", nameOr(*p), pr.Type, mib(p.WeightBytes), pr.PatchSize, pr.MergeSize,
				float64(pr.MaxPixels)/1e6, pr.MaxImageTokens, pr.ImageTokens(1920, 1080), pr.ImageTokens(2560, 1440),
				r.MaxImageTokens)
		} else {
			ew.printf("projector  %s (%s): %s, image %dpx, patch %d, %d tokens/image\n", nameOr(*p), pr.Type,
				mib(p.WeightBytes), pr.ImageSize, pr.PatchSize, pr.TokensPerImage)
		}
		if r.MaxImagePixels > 0 && r.MaxImagePixels < pr.MaxPixels {
			ew.printf("image cap  %d pixels (%d tokens): larger images are resized to fit\n", r.MaxImagePixels, r.MaxImageTokens)
		}
	}
	reserved := ""
	if r.GPU.Reserved > 0 {
		reserved = ", " + mib(r.GPU.Reserved) + " reserved by the driver"
	}
	ew.printf("gpu        %s (%s): %s free of %s%s; planning for %s (margin %s)\n", r.GPU.Name, r.GPU.Source,
		mib(r.GPU.Free), mib(r.GPU.Total), reserved, mib(r.Usable), mib(r.Options.Margin))
	ew.printf("options    ctx %d, cache %s/%s, ubatch %d, %d sequence(s)\n\n", r.Options.Ctx, r.Options.CacheK,
		r.Options.CacheV, r.Options.UBatch, r.Options.Parallel)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	head := []string{"MiB"}
	var names []string
	seen := map[string]bool{}
	for _, p := range r.Modes {
		head = append(head, string(p.Mode))
		for _, c := range p.Components {
			if !seen[c.Name] {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
		}
	}
	row(head...)
	for _, n := range names {
		cells := []string{n}
		for _, p := range r.Modes {
			cell := "-"
			for _, c := range p.Components {
				if c.Name == n {
					cell = group(int64((c.Bytes + MiB/2) / MiB))
				}
			}
			cells = append(cells, cell)
		}
		row(cells...)
	}
	line := func(label string, f func(ModePlan) string) {
		cells := []string{label}
		for _, p := range r.Modes {
			cells = append(cells, f(p))
		}
		row(cells...)
	}
	line("total", func(p ModePlan) string { return group(int64((p.Total + MiB/2) / MiB)) })
	line("headroom", func(p ModePlan) string { return group(p.Headroom / MiB) })
	line("fits", func(p ModePlan) string {
		switch {
		case !p.Available:
			return "n/a"
		case p.Fits:
			return "yes"
		}
		return "no"
	})
	line("max ctx", func(p ModePlan) string { return group(int64(p.MaxCtx)) })
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("\n")
	for _, p := range r.Modes {
		ew.printf("%-14s %s", p.Mode, p.Description)
		if !p.Available {
			ew.printf(" [unavailable: %s]", p.Reason)
		}
		ew.printf("\n               llama-server %s\n", strings.Join(p.Args, " "))
	}
	if err := r.writeDevices(ew); err != nil {
		return err
	}
	// The recommendation is what `--plan auto` starts first, so the user sees the command before it runs.
	if rec, ok := r.Recommended(); ok {
		reduced := ""
		if !rec.Fits {
			reduced = fmt.Sprintf(", reduced from %d", rec.Ctx)
		}
		ew.printf("\nrecommended: %s (ctx %d%s)\n               llama-server %s\n", rec.Mode, rec.LaunchCtx(), reduced,
			strings.Join(rec.Args, " "))
	} else {
		ew.printf("\nrecommended: none: no mode fits at %d tokens or more; free GPU memory, lower the context, "+
			"quantise the KV cache (-ctk/-ctv q8_0) or use a smaller model file\n", MinUsefulCtx)
	}
	if r.KV != nil {
		ew.printf("kv cache:      %s\n", r.KV.Why)
	}
	for _, k := range r.KVOffers {
		ew.printf("kv %s:     keeps the full %d tokens: %s fits in %s with --cache-type %s\n               llama-server %s\n",
			k.Cache, r.Options.Ctx, k.Mode, mib(k.Total), k.Cache, strings.Join(k.Args, " "))
	}
	for _, n := range r.Notes {
		ew.printf("note: %s\n", n)
	}
	return ew.err
}

func nameOr(f Facts) string {
	if f.Name != "" {
		return f.Name
	}
	return f.Path
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }
