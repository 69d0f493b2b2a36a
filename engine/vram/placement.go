package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// Placements over several GPUs. Each puts part of what ModeResident keeps on one card on another one, so that
// vision and MTP can stay resident where a single card would need a swap or a shorter context.
const (
	// ModeProjectorApart keeps the whole model and its MTP draft context on one GPU and the vision projector on
	// another (--device A --mmproj-device B). Nothing crosses the cards per token, so it is as fast as resident.
	ModeProjectorApart Mode = "projector-apart"
	// ModeDraftApart splits the layers so that a second GPU holds only the MTP (NextN) layer, its draft context
	// and the output head; the projector goes where it fits best. MTP's draft context follows the device of the
	// NextN layer: llama-server's --spec-draft-device does not move it (seen on Debian b11669).
	ModeDraftApart Mode = "draft-apart"
	// ModeSplit splits the layers over all GPUs (-sm layer -ts …), balanced so that every card keeps the same
	// headroom; the MTP draft context lives with the last card's NextN layer.
	ModeSplit Mode = "layer-split"
)

// noPipelineOverride is a tensor override that changes nothing (token_embd stays in host memory anyway) but, as
// any -ot does, turns llama.cpp's pipeline parallelism off. With it on, a layer split keeps 4 copies of every
// graph input on each card and on the host, the attention mask included: measured over two RPC devices, each
// card's compute buffer grew by 4× the mask (64 MiB per 16K cells at -ub 512, 4 GiB per card at 262K × 2048),
// against 1× without. Pipelining only speeds up prompts of several ubatches; one mask per card is what fits.
const noPipelineOverride = `token_embd\.weight=CPU`

// DevicePlan is one device's share of a placement.
type DevicePlan struct {
	Device     string      `json:"device"` // llama-server's name
	GPU        string      `json:"gpu"`
	Components []Component `json:"components"`
	Total      uint64      `json:"total"`
	Usable     uint64      `json:"usable"`
	Headroom   int64       `json:"headroom"`
	Fits       bool        `json:"fits"`
	MaxCtx     int         `json:"max_ctx"`
	// Layers is the block range [first, end) on this device; empty when it holds none. Output says it holds the
	// output head (the last device of a split).
	Layers [2]int `json:"layers"`
	Output bool   `json:"output,omitempty"`
}

var multiDescriptions = map[Mode]string{
	ModeProjectorApart: "model and MTP draft on one GPU, vision projector on another",
	ModeDraftApart:     "main layers on one GPU; the MTP layer, its draft context and the output head on another",
	ModeSplit:          "layers split over the GPUs by free memory; MTP with the last one",
}

// PlanDevices plans for several GPUs. With one device it is Plan, unchanged. With more, the single-device modes
// are planned on the device with the most free memory and pinned to it (--device), since llama-server would
// otherwise spread the model over every GPU it sees, and the multi-device placements are added.
func PlanDevices(model Facts, proj *Facts, devs []Device, opts Options) (Result, error) {
	if len(devs) == 0 {
		return Result{}, fmt.Errorf("vram: %w: no devices to plan for", ErrNoGPU)
	}
	if len(devs) == 1 {
		return Plan(model, proj, devs[0].GPU, opts)
	}
	main := 0
	for i, d := range devs {
		if d.GPU.Free > devs[main].GPU.Free {
			main = i
		}
	}
	if opts.CacheK == "" && opts.CacheV == "" {
		// The placements over several cards are planned with f16 caches; the single-card KV choice (kv.go)
		// would leave the two halves of this plan with different caches.
		opts.CacheK, opts.CacheV = "f16", "f16"
	}
	res, err := Plan(model, proj, devs[main].GPU, opts)
	if err != nil {
		return Result{}, err
	}
	res.Devices = devs
	for i, p := range res.Modes {
		res.Modes[i].Args = append(p.Args, "-dev", devs[main].Name)
		if p.Mode != ModeSwap {
			// Pinned to one card, the mode's buffers all belong on it: say so, so that the load-log check
			// catches a device name that is not the card the plan measured. (mtp-swap's swapping pair has no
			// single buffer to check.)
			res.Modes[i].Devices = []DevicePlan{{Device: devs[main].Name, GPU: devs[main].GPU.Name,
				Components: p.Components, Total: p.Total, Usable: res.Usable, Headroom: p.Headroom, Fits: p.Fits,
				MaxCtx: p.MaxCtx, Layers: [2]int{0, model.Layers + model.NextNLayers}, Output: true}}
		}
	}
	o, err := resolve(model, opts)
	if err != nil {
		return Result{}, err
	}
	if proj != nil {
		o.imageTokens, _, o.capTokens = imageBudget(proj.Projector, o.MaxImagePixels) // as plan does
	}
	mtp := len(model.NextNAttn) > 0 && !o.NoMTP
	other := -1
	for i, d := range devs {
		if i != main && (other < 0 || d.GPU.Free > devs[other].GPU.Free) {
			other = i
		}
	}
	pl := planner{model: model, proj: proj, o: o, devs: devs, mtp: mtp}
	if proj != nil {
		res.Modes = append(res.Modes, pl.plan(ModeProjectorApart, layout{devs: []int{main}, ends: []int{pl.blocks()}, proj: other}))
	}
	if len(model.LayerBytes) != pl.blocks() || pl.blocks() < 2 {
		res.Notes = append(res.Notes, "the model's per-layer sizes are unknown: layer splits were not planned")
		return res, nil
	}
	if mtp {
		// All main layers on the roomiest card; the NextN layers and the output head on the next.
		l := layout{devs: []int{main, other}, ends: []int{model.Layers, pl.blocks()}, proj: -1}
		res.Modes = append(res.Modes, pl.plan(ModeDraftApart, pl.bestProjector(l)))
	}
	order := make([]int, len(devs))
	for i := range order {
		order[i] = i
	}
	res.Modes = append(res.Modes, pl.plan(ModeSplit, pl.bestSplit(order)))
	res.KVOffers = pinOffers(res, devs[main].Name)
	return res, nil
}

// pinOffers keeps Plan's quantized-KV offers (made for the single card) only when no placement fits as asked,
// pinned to that card like its modes.
func pinOffers(res Result, name string) []KVOffer {
	if rec, ok := res.Recommended(); ok && rec.Fits {
		return nil
	}
	offers := append([]KVOffer(nil), res.KVOffers...)
	for i := range offers {
		offers[i].Args = append(append([]string(nil), offers[i].Args...), "-dev", name)
	}
	return offers
}

// layout is where a placement puts things: devs are indexes into the device list in llama-server's --device
// order, ends[i] the end of device i's block range (the last is the block count), proj the projector's device
// (an index into the device list; -1 when there is no projector).
type layout struct {
	devs []int
	ends []int
	proj int
}

type planner struct {
	model Facts
	proj  *Facts
	o     resolved
	devs  []Device
	mtp   bool
}

func (pl planner) blocks() int { return pl.model.Layers + pl.model.NextNLayers }

func (pl planner) ubatch() int {
	if pl.proj != nil && pl.proj.Projector.TokensPerImage > pl.o.UBatch {
		return pl.proj.Projector.TokensPerImage // as planMode: an image's tokens fit one ubatch
	}
	return pl.o.UBatch
}

func (pl planner) usable(d int) uint64 {
	if f := pl.devs[d].GPU.Free; f > pl.o.Margin {
		return f - pl.o.Margin
	}
	return 0
}

// budget is each device's components at ctx, keyed by device index.
func (pl planner) budget(l layout, ctx int) map[int][]Component {
	m, o := pl.model, pl.o
	cells := uint64(padCtx(ctx))
	ub := pl.ubatch()
	out := map[int][]Component{}
	add := func(d int, name string, bytes, perTok uint64, note string) {
		out[d] = append(out[d], Component{Name: name, Bytes: bytes, PerToken: perTok, Note: note})
	}
	attn := map[int]AttnLayer{}
	for _, a := range m.Attn {
		attn[a.Index] = a
	}
	for _, a := range m.NextNAttn {
		attn[a.Index] = a
	}
	var rsLayer uint64
	if m.RecurrentLayers > 0 {
		copies := uint64(o.Parallel)
		if pl.mtp {
			copies *= uint64(1 + o.DraftMax)
		}
		rsLayer = m.RecurrentSeqBytes / uint64(m.RecurrentLayers) * copies
	}
	lo := 0
	for i, d := range l.devs {
		hi := l.ends[i]
		last := i == len(l.devs)-1
		var w uint64
		var kvLayers, mtpLayers []AttnLayer
		var rs, main int
		for b := lo; b < hi && b < len(m.LayerBytes); b++ {
			w += m.LayerBytes[b]
			a, isAttn := attn[b]
			switch {
			case b >= m.Layers:
				if isAttn {
					mtpLayers = append(mtpLayers, a)
				}
			case isAttn:
				kvLayers = append(kvLayers, a)
				main++
			default:
				main++
				if m.RecurrentLayers > 0 {
					rs++
				}
			}
		}
		if len(m.LayerBytes) == 0 {
			// One device with the whole model (projector-apart on hand-built facts): what Plan counts.
			w = m.WeightBytes - m.HostBytes
			kvLayers, mtpLayers, main, rs = m.Attn, m.NextNAttn, m.Layers, m.RecurrentLayers
		} else if last {
			w += m.OutputBytes
		}
		if last {
			w += m.GPUCopyBytes
		}
		add(d, "weights", w, 0, fmt.Sprintf("blocks %d–%d%s", lo, hi-1, map[bool]string{true: " and the output head"}[last]))
		if len(kvLayers) > 0 {
			kvTok := kvPerToken(kvLayers, o.k, o.v)
			add(d, "KV cache", kvTok*cells, kvTok, fmt.Sprintf("%d attention layers, %s/%s", len(kvLayers), o.k, o.v))
		}
		if rs > 0 {
			add(d, "recurrent state", rsLayer*uint64(rs), 0, fmt.Sprintf("%d recurrent layers", rs))
		}
		maskTok, fixed := computePerToken(m, o, ub, false)
		switch {
		case main > 0:
			// Without pipeline parallelism each card that runs main layers reserves what one card would
			// (measured 88.3 and 84.3 MiB against 88.3 on one card).
			add(d, "compute", fixed+maskTok*cells, maskTok, fmt.Sprintf("ubatch %d", ub))
		case last:
			add(d, "compute", 4*uint64(m.Vocab)*uint64(o.Parallel), 0, "logits only: no main layer here")
		}
		if pl.mtp && len(mtpLayers) > 0 {
			kvd := kvPerToken(mtpLayers, o.draft, o.draft)
			mTok, mFixed := computePerToken(m, o, ub, true)
			add(d, "MTP KV", kvd*cells, kvd, fmt.Sprintf("draft context, %s", o.draft))
			add(d, "MTP compute", mFixed+mTok*cells, mTok, "draft context's compute buffer")
		}
		lo = hi
	}
	if pl.proj != nil && l.proj >= 0 {
		add(l.proj, "projector", pl.proj.WeightBytes, 0, pl.proj.Projector.Type)
		patches := encoderPatches(pl.proj.Projector, pl.o.imageTokens)
		add(l.proj, "encoder compute", encoderCompute(pl.proj.Projector, patches), 0,
			fmt.Sprintf("largest image: %d tokens (%d patches)", pl.o.imageTokens, patches))
	}
	for d := range out {
		add(d, "driver context", o.Overhead, 0, "CUDA/Vulkan context of the server process on this device")
	}
	return out
}

func (pl planner) plan(mode Mode, l layout) ModePlan {
	p := ModePlan{Mode: mode, Description: multiDescriptions[mode], Available: true, Ctx: pl.o.Ctx, UBatch: pl.ubatch()}
	at := pl.budget(l, pl.o.Ctx)
	t1, t2 := pl.budget(l, ctxPad), pl.budget(l, 2*ctxPad)
	limit := pl.model.CtxTrain
	if limit <= 0 {
		limit = pl.o.Ctx
	}
	p.Fits, p.MaxCtx = true, limit
	first := true
	byName := map[string]int{}
	for d := range pl.devs {
		cs, ok := at[d]
		if !ok {
			continue
		}
		dp := DevicePlan{Device: pl.devs[d].Name, GPU: pl.devs[d].GPU.Name, Components: cs, Total: sum(cs), Usable: pl.usable(d)}
		dp.Headroom = int64(dp.Usable) - int64(dp.Total)
		dp.Fits = dp.Total <= dp.Usable
		dp.MaxCtx = maxCtx(sum(t1[d]), sum(t2[d]), dp.Usable, limit)
		lo := 0
		for i, li := range l.devs {
			if li == d {
				dp.Layers = [2]int{lo, l.ends[i]}
				dp.Output = i == len(l.devs)-1
			}
			lo = l.ends[i]
		}
		p.Devices = append(p.Devices, dp)
		p.Total += dp.Total
		if first || dp.Headroom < p.Headroom {
			p.Headroom = dp.Headroom
		}
		first = false
		p.Fits = p.Fits && dp.Fits
		p.MaxCtx = min(p.MaxCtx, dp.MaxCtx)
		// The mode's components are the devices' summed, so the one-column-per-mode table still reads.
		for _, c := range cs {
			if j, ok := byName[c.Name]; ok {
				p.Components[j].Bytes += c.Bytes
				p.Components[j].PerToken += c.PerToken
				continue
			}
			byName[c.Name] = len(p.Components)
			p.Components = append(p.Components, Component{Name: c.Name, Bytes: c.Bytes, PerToken: c.PerToken})
		}
	}
	argCtx := pl.o.Ctx
	if !p.Fits && p.MaxCtx > 0 {
		argCtx = p.MaxCtx
	}
	p.Args = pl.args(l, argCtx)
	return p
}

// maxCtx is the largest context (a multiple of ctxPad, at most limit) whose affine total fits in usable, from
// the totals at ctxPad (t1) and 2·ctxPad (t2) cells; 0 when none does.
func maxCtx(t1, t2, usable uint64, limit int) int {
	switch {
	case t1 > usable:
		return 0
	case t2 <= t1:
		return limit
	}
	perCell := (t2 - t1) / ctxPad
	if perCell == 0 {
		return limit
	}
	cells := uint64(ctxPad) + (usable-t1)/perCell
	return int(min(cells/ctxPad*ctxPad, uint64(limit)))
}

func (pl planner) args(l layout, ctx int) []string {
	base := ModeTextOnly
	if pl.proj != nil {
		base = ModeResident
	}
	a := args(pl.model, pl.proj, pl.o, base, pl.ubatch(), ctx, pl.mtp)
	names := make([]string, len(l.devs))
	for i, d := range l.devs {
		names[i] = pl.devs[d].Name
	}
	a = append(a, "-dev", strings.Join(names, ","))
	if len(l.devs) > 1 {
		a = append(a, "-sm", "layer", "-ts", tensorSplit(l.ends, pl.blocks()), "-ot", noPipelineOverride)
	}
	if pl.proj != nil && l.proj >= 0 {
		a = append(a, "--mmproj-device", pl.devs[l.proj].Name)
	}
	return a
}

// tensorSplit writes -ts proportions that put blocks [ends[i-1], ends[i]) on device i. With -ngl over the block
// count llama.cpp spreads blocks+1 layers (the output head is the last) and gives layer il to the first device
// whose cumulative share exceeds il/(blocks+1); putting each boundary half a layer before ends[i] keeps float
// rounding off it. In units of 1/(2·(blocks+1)): first 2·e0−1, then 2·(ei−ei−1), last the rest.
func tensorSplit(ends []int, blocks int) string {
	n := 2 * (blocks + 1)
	parts := make([]string, len(ends))
	prev := 0 // boundary so far, in half-layer units
	for i := range ends {
		var cut int
		if i == len(ends)-1 {
			cut = n
		} else {
			cut = 2*ends[i] - 1
		}
		parts[i] = strconv.Itoa(cut - prev)
		prev = cut
	}
	return strings.Join(parts, ",")
}

// bestProjector puts the projector on the device of l that keeps the most headroom at the requested context.
func (pl planner) bestProjector(l layout) layout {
	if pl.proj == nil {
		return l
	}
	best, bestHead := -1, int64(0)
	for d := range pl.devs {
		l.proj = d
		if h := pl.minHeadroom(l); best < 0 || h > bestHead {
			best, bestHead = d, h
		}
	}
	l.proj = best
	return l
}

func (pl planner) minHeadroom(l layout) int64 {
	at := pl.budget(l, pl.o.Ctx)
	first, worst := true, int64(0)
	for d, cs := range at {
		h := int64(pl.usable(d)) - int64(sum(cs))
		if first || h < worst {
			worst, first = h, false
		}
	}
	return worst
}

// bestSplit balances the layers over order for each place the projector could go and keeps the layout with the
// largest minimum headroom.
func (pl planner) bestSplit(order []int) layout {
	if pl.proj == nil {
		return pl.balance(order, -1)
	}
	var best layout
	var bestHead int64
	for d := range pl.devs {
		l := pl.balance(order, d)
		if h := pl.minHeadroom(l); d == 0 || h > bestHead {
			best, bestHead = l, h
		}
	}
	return best
}

// balance chooses contiguous block ranges over order (every device at least one block), with the projector on
// device proj, that leave the largest minimum headroom: proportional to usable memory first, then each boundary
// moved while that improves.
func (pl planner) balance(order []int, proj int) layout {
	n := pl.blocks()
	l := layout{devs: order, ends: make([]int, len(order)), proj: proj}
	var total uint64
	for _, d := range order {
		total += pl.usable(d)
	}
	var acc uint64
	for i, d := range order {
		acc += pl.usable(d)
		e := n
		if i < len(order)-1 && total > 0 {
			e = int(uint64(n) * acc / total)
		}
		l.ends[i] = max(e, i+1)
	}
	for i := range l.ends[:len(l.ends)-1] {
		l.ends[i] = min(l.ends[i], n-(len(order)-1-i))
	}
	for improved := true; improved; {
		improved = false
		for i := 0; i < len(l.ends)-1; i++ {
			for _, step := range []int{-1, 1} {
				e := l.ends[i] + step
				lo := 1
				if i > 0 {
					lo = l.ends[i-1] + 1
				}
				if e < lo || e >= l.ends[i+1] {
					continue
				}
				cur := pl.minHeadroom(l)
				l.ends[i] = e
				if pl.minHeadroom(l) > cur {
					improved = true
					continue
				}
				l.ends[i] -= step
			}
		}
	}
	return l
}
