package vram

import (
	"fmt"
	"strconv"

	"github.com/visorhq/visor/engine/gguf"
)

// MiB is 2^20 bytes, the unit llama.cpp and nvidia-smi print.
const MiB = 1 << 20

// Defaults, chosen to match llama-server's.
const (
	// DefaultMargin is llama.cpp's default --fit-target: memory left free for the driver, other processes and
	// allocations the projection does not see.
	DefaultMargin = 1024 * MiB
	// DefaultOverhead is the driver context llama-server's process holds beyond its buffers: measured 65–97 MiB
	// on the H200 through Vulkan (docs/engine-notes.md §7); CUDA's is larger, so raise it there.
	DefaultOverhead = 100 * MiB
	// contextOverhead is what each further GPU context of the server (the MTP draft's, the vision encoder's) adds
	// to the driver context: the H200 run of the seed check (Vulkan, resident mode: main + MTP draft + encoder)
	// measured 229–240 MiB held beyond llama.cpp's reservations after the first requests, against about 100 for
	// one context (engine-notes §7, §9). How the 140 MiB divides between the two further contexts was not measured;
	// half each is an assumption.
	contextOverhead = 70 * MiB
	DefaultUBatch   = 512
	DefaultDraftMax = 3
	// ctxPad is the granularity llama.cpp rounds n_ctx up to (seen: -c 1000 gives n_ctx 1024).
	ctxPad = 256
)

// Mode is a way to place the model, its MTP draft context and its projector.
type Mode string

// The placement modes the plan compares.
const (
	// ModeResident keeps weights, MTP draft context and projector on the GPU at once.
	ModeResident Mode = "resident"
	// ModeSwap keeps the projector on the CPU and swaps it with the MTP draft context for image encodes
	// (--mmproj-gpu-swap, spiritbuun/buun-llama-cpp only): the peak is the larger of the two.
	ModeSwap Mode = "mtp-swap"
	// ModeVisionCPU runs the vision encoder on the CPU (--no-mmproj-offload): slow encodes, full GPU for text.
	ModeVisionCPU Mode = "vision-cpu"
	// ModeTextOnly loads no projector.
	ModeTextOnly Mode = "text-only"
	// ModeVisionNoMTP keeps the projector resident and gives up speculation.
	ModeVisionNoMTP Mode = "vision-no-mtp"
)

// GPU is one device to plan for.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Total uint64 `json:"total"`
	Free  uint64 `json:"free"`
	Used  uint64 `json:"used"`
	// Reserved is memory the driver keeps for itself (NVML's v2 query; 0 from v1, which counts it as used):
	// ~615 MiB on an idle H200. Free is what the plan can use either way.
	Reserved uint64 `json:"reserved,omitempty"`
	// Source says where the numbers come from: "nvml" (v2 memory query), "nvml-v1", "meminfo" (a CPU plan) or
	// "manual" (--gpu SIZE).
	Source    string    `json:"source"`
	Processes []Process `json:"processes,omitempty"`
}

// Process is a process holding GPU memory.
type Process struct {
	PID  uint32 `json:"pid"`
	Name string `json:"name,omitempty"`
	Used uint64 `json:"used"`
}

// Options are the launch choices to plan for. The zero value plans llama-server's defaults with flash attention
// and one sequence, at the model's training context, with f16 caches, or, with a projector, the cache type that
// serves a vision session best (Result.KV).
type Options struct {
	// Ctx is the context to check (-c); 0 means the model's training context.
	Ctx int `json:"ctx"`
	// CacheK and CacheV are -ctk/-ctv ("f16" when empty); DraftCache is the MTP context's -ctkd/-ctvd.
	CacheK     string `json:"cache_k,omitempty"`
	CacheV     string `json:"cache_v,omitempty"`
	DraftCache string `json:"draft_cache,omitempty"`
	UBatch     int    `json:"ubatch,omitempty"`
	Parallel   int    `json:"parallel,omitempty"`
	// DraftMax is --spec-draft-n-max; each drafted token keeps a rollback copy of the recurrent state.
	DraftMax    int  `json:"draft_max,omitempty"`
	NoMTP       bool `json:"no_mtp,omitempty"`
	NoFlashAttn bool `json:"no_flash_attn,omitempty"`
	// Margin is memory to leave free (DefaultMargin when 0); Overhead the driver context (DefaultOverhead when 0).
	Margin   uint64 `json:"margin,omitempty"`
	Overhead uint64 `json:"overhead,omitempty"`
	// SwapSupported says the server has --mmproj-gpu-swap; without it ModeSwap is planned but marked unavailable.
	SwapSupported bool `json:"swap_supported,omitempty"`
	// MaxImagePixels caps the images a session sends (width × height); 0 takes the projector's own limit. A cap
	// below that limit shrinks the encoder's budget, adds --image-max-tokens so llama-server resizes the same
	// way, and is what image intake must enforce (Result.MaxImagePixels).
	MaxImagePixels int `json:"max_image_pixels,omitempty"`
	// CPU plans for system RAM instead of a GPU: everything, the token embedding included, lives in host memory
	// and llama-server gets -ngl 0.
	CPU bool `json:"cpu,omitempty"`
}

// Component is one line of a mode's budget.
type Component struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
	// PerToken is the part that grows with the context, in bytes per context cell (0 for fixed costs).
	PerToken uint64 `json:"per_token,omitempty"`
	Note     string `json:"note,omitempty"`
}

// ModePlan is the verdict for one mode.
type ModePlan struct {
	Mode        Mode        `json:"mode"`
	Description string      `json:"description"`
	Available   bool        `json:"available"`
	Reason      string      `json:"reason,omitempty"`
	Ctx         int         `json:"ctx"`
	UBatch      int         `json:"ubatch"`
	Components  []Component `json:"components"`
	Total       uint64      `json:"total"`
	Fits        bool        `json:"fits"`
	Headroom    int64       `json:"headroom"`
	// MaxCtx is the largest context (a multiple of 256, at most the training context) that fits; 0 if none.
	MaxCtx int `json:"max_ctx"`
	// Args are llama-server arguments realising this mode at Ctx when it fits, else at MaxCtx.
	Args []string `json:"args"`
	// Devices is each GPU's share, for placements over several (PlanDevices); Total is then their sum and
	// Headroom the smallest.
	Devices []DevicePlan `json:"devices,omitempty"`
}

// Result is a complete plan.
type Result struct {
	Model     Facts      `json:"model"`
	Projector *Facts     `json:"projector,omitempty"`
	GPU       GPU        `json:"gpu"`
	Options   Options    `json:"options"`
	Usable    uint64     `json:"usable"`
	Modes     []ModePlan `json:"modes"`
	Notes     []string   `json:"notes,omitempty"`
	// MaxImageTokens and MaxImagePixels describe the largest image the vision modes are budgeted for. Image
	// intake must resize any image with more pixels than MaxImagePixels before sending it: a larger one grows the
	// encoder's buffer past the plan. Both are 0 without a projector.
	MaxImageTokens int `json:"max_image_tokens,omitempty"`
	MaxImagePixels int `json:"max_image_pixels,omitempty"`
	// KVOffers lists quantized KV cache types that keep the requested context where the chosen types do not.
	KVOffers []KVOffer `json:"kv_offers,omitempty"`
	// KV is set when no cache type was asked for and the plan chose a quantized one for a vision session
	// (Options then holds it), with why.
	KV *KVChoice `json:"kv,omitempty"`

	// Devices are all the GPUs of a multi-device plan (PlanDevices); GPU is then the one single-device modes use.
	Devices []Device `json:"devices,omitempty"`
	// Prefer, when set, puts that mode first among the candidates to launch (the swap scheduler's choice).
	Prefer Mode
}

// KVOffer is a KV cache type under which a mode fits at the full requested context.
type KVOffer struct {
	Cache string   `json:"cache"` // for -ctk and -ctv, e.g. "q8_0"
	Mode  Mode     `json:"mode"`  // the best mode that then fits
	Total uint64   `json:"total"` // its budget
	Args  []string `json:"args"`
}

// Mode returns the plan for m, if it was planned.
func (r Result) Mode(m Mode) (ModePlan, bool) {
	for _, p := range r.Modes {
		if p.Mode == m {
			return p, true
		}
	}
	return ModePlan{}, false
}

// resolved are Options with defaults filled in and cache types parsed.
type resolved struct {
	Options
	k, v, draft gguf.Type
	// imageTokens is the largest image's tokens the encoder is budgeted for; capTokens is non-zero when a cap
	// below the projector's limit must be passed to llama-server (--image-max-tokens).
	imageTokens, capTokens int
}

func resolve(model Facts, o Options) (resolved, error) {
	r := resolved{Options: o}
	if r.Ctx <= 0 {
		r.Ctx = model.CtxTrain
	}
	if r.Ctx <= 0 {
		r.Ctx = 4096
	}
	if r.UBatch <= 0 {
		r.UBatch = DefaultUBatch
	}
	if r.Parallel <= 0 {
		r.Parallel = 1
	}
	if r.DraftMax <= 0 {
		r.DraftMax = DefaultDraftMax
	}
	if r.Margin == 0 {
		r.Margin = DefaultMargin
	}
	if r.Overhead == 0 {
		r.Overhead = DefaultOverhead
	}
	var err error
	parse := func(s string, dst *gguf.Type, flag string) {
		if err != nil {
			return
		}
		if s == "" {
			s = "f16"
		}
		var t gguf.Type
		if t, err = gguf.ParseType(s); err != nil {
			err = fmt.Errorf("vram: %s: %w", flag, err)
			return
		}
		*dst = t
	}
	parse(r.CacheK, &r.k, "cache type K (-ctk)")
	parse(r.CacheV, &r.v, "cache type V (-ctv)")
	parse(r.DraftCache, &r.draft, "draft cache type (-ctkd/-ctvd)")
	r.CacheK, r.CacheV, r.DraftCache = r.k.String(), r.v.String(), r.draft.String()
	return r, err
}

// Plan computes the memory budget of every applicable mode for model (and projector, when proj is non-nil) on
// gpu. It is pure arithmetic over the facts; see the package documentation for the formulas.
func Plan(model Facts, proj *Facts, gpu GPU, opts Options) (Result, error) {
	res, err := plan(model, proj, gpu, opts)
	if err != nil {
		return res, err
	}
	if opts.CacheK == "" && opts.CacheV == "" && proj != nil && !opts.CPU {
		// No cache type asked for and a session that will see images: KV precision is one more dimension of
		// the plan (kv.go), so that a quantized cache that keeps vision and MTP on the GPU at the full context
		// wins over a CPU encoder or a cut context.
		if r, choice := chooseKV(model, proj, gpu, opts, res, DefaultStepCosts()); choice != nil {
			r.KV = choice
			return r, nil
		}
	}
	res.KVOffers = kvOffers(model, proj, gpu, opts, res)
	return res, nil
}

// kvOffers re-plans with q8_0 and q4_0 caches when the chosen types (f16 by default) cannot keep the requested
// context in the recommended mode: a quantized cache often keeps the whole window that f16 would cut.
func kvOffers(model Facts, proj *Facts, gpu GPU, opts Options, res Result) []KVOffer {
	if rec, ok := res.Recommended(); ok && rec.Fits {
		return nil
	}
	cur := res.Options.CacheK + "/" + res.Options.CacheV
	var offers []KVOffer
	for _, c := range []string{"q8_0", "q4_0"} {
		if cur == c+"/"+c {
			continue
		}
		o := opts
		o.CacheK, o.CacheV = c, c
		r, err := plan(model, proj, gpu, o)
		if err != nil {
			continue // the head size does not suit the block size; f16 stays the only choice
		}
		if rec, ok := r.Recommended(); ok && rec.Fits {
			offers = append(offers, KVOffer{Cache: c, Mode: rec.Mode, Total: rec.Total, Args: rec.Args})
		}
	}
	return offers
}

func plan(model Facts, proj *Facts, gpu GPU, opts Options) (Result, error) {
	o, err := resolve(model, opts)
	if err != nil {
		return Result{}, err
	}
	if proj != nil && proj.Projector == nil {
		return Result{}, fmt.Errorf("vram: %s is not a vision projector (arch %q): pass the mmproj file", proj.Path, proj.Arch)
	}
	if o.CPU {
		// A CPU plan has no driver context and keeps the token embedding with the rest.
		o.Overhead = 0
		model.GPUCopyBytes, model.HostBytes = 0, 0
	}
	res := Result{Model: model, Projector: proj, GPU: gpu, Options: o.Options}
	if proj != nil {
		var pixels int
		o.imageTokens, pixels, o.capTokens = imageBudget(proj.Projector, o.MaxImagePixels)
		res.MaxImageTokens, res.MaxImagePixels = o.imageTokens, pixels
	}
	if gpu.Free > o.Margin {
		res.Usable = gpu.Free - o.Margin
	}
	mtp := len(model.NextNAttn) > 0 && !o.NoMTP
	if len(model.NextNAttn) > 0 && o.NoMTP {
		res.Notes = append(res.Notes, "the model has an MTP layer but --no-mtp was asked: its weights still load")
	}
	for _, l := range append(append([]AttnLayer{}, model.Attn...), model.NextNAttn...) {
		for _, t := range []gguf.Type{o.k, o.v, o.draft} {
			if bs := t.BlockSize(); bs > 1 && l.KeyDim%int(bs) != 0 {
				return Result{}, fmt.Errorf("vram: cache type %s needs a head size divisible by %d, %s has %d: use f16",
					t, bs, model.Path, l.KeyDim)
			}
		}
	}
	if o.NoFlashAttn {
		res.Notes = append(res.Notes, "without flash attention the compute buffer holds n_ctx × ubatch × n_head F32 scores; "+
			"measured 1× at 16K but about 2× at 64K, so long contexts may need more than planned")
	}
	if (o.k != gguf.TypeF16 || o.v != gguf.TypeF16) && o.NoFlashAttn {
		res.Notes = append(res.Notes, "llama.cpp needs flash attention for a quantized V cache; it will turn it on")
	}
	var modes []Mode
	switch {
	case o.CPU && proj != nil && mtp:
		// On the CPU "resident" is everything in RAM; offloading the projector or swapping means nothing.
		modes = []Mode{ModeResident, ModeTextOnly, ModeVisionNoMTP}
	case o.CPU && proj != nil:
		modes = []Mode{ModeResident, ModeTextOnly}
	case proj != nil && mtp:
		modes = []Mode{ModeResident, ModeSwap, ModeVisionCPU, ModeTextOnly, ModeVisionNoMTP}
	case proj != nil:
		modes = []Mode{ModeResident, ModeVisionCPU, ModeTextOnly}
	default:
		modes = []Mode{ModeTextOnly}
	}
	for _, m := range modes {
		res.Modes = append(res.Modes, planMode(model, proj, o, m, mtp, res.Usable))
	}
	if model.CtxTrain > 0 && o.Ctx > model.CtxTrain {
		res.Notes = append(res.Notes, fmt.Sprintf("context %d exceeds the training context %d", o.Ctx, model.CtxTrain))
	}
	return res, nil
}

var descriptions = map[Mode]string{
	ModeResident:    "weights, MTP draft context and projector all in VRAM",
	ModeSwap:        "projector swaps with the MTP draft context for image encodes (--mmproj-gpu-swap)",
	ModeVisionCPU:   "vision encoder on the CPU (slow image encodes)",
	ModeTextOnly:    "no projector",
	ModeVisionNoMTP: "projector in VRAM, no speculative decoding",
}

var cpuDescriptions = map[Mode]string{
	ModeResident:    "weights, MTP draft context and vision encoder in system RAM (CPU)",
	ModeTextOnly:    "no projector, in system RAM (CPU)",
	ModeVisionNoMTP: "vision encoder in system RAM, no speculative decoding (CPU)",
}

func planMode(model Facts, proj *Facts, o resolved, m Mode, mtp bool, usable uint64) ModePlan {
	useMTP := mtp && m != ModeVisionNoMTP
	gpuProj := proj != nil && (m == ModeResident || m == ModeSwap || m == ModeVisionNoMTP)
	if !mtp && m == ModeResident {
		useMTP = false
	}
	ub := o.UBatch
	if proj != nil && m != ModeTextOnly && proj.Projector.TokensPerImage > ub {
		// An image's tokens must fit one ubatch, so the image size drives both contexts' compute buffers.
		ub = proj.Projector.TokensPerImage
	}
	p := ModePlan{Mode: m, Description: descriptions[m], Available: true, Ctx: o.Ctx, UBatch: ub}
	if o.CPU {
		p.Description = cpuDescriptions[m]
	}
	if m == ModeSwap && !o.SwapSupported {
		p.Available = false
		p.Reason = "needs a llama-server with --mmproj-gpu-swap (spiritbuun/buun-llama-cpp); upstream lacks it"
	}
	budget := func(ctx int) []Component { return components(model, proj, o, ub, ctx, useMTP, gpuProj, m == ModeSwap) }
	p.Components = budget(o.Ctx)
	p.Total = sum(p.Components)
	p.Headroom = int64(usable) - int64(p.Total)
	p.Fits = p.Total <= usable
	// The total is affine in the padded context, so two evaluations give the slope.
	t1, t2 := sum(budget(ctxPad)), sum(budget(2*ctxPad))
	slope := t2 - t1
	limit := model.CtxTrain
	if limit <= 0 {
		limit = o.Ctx
	}
	switch {
	case t1 > usable:
		p.MaxCtx = 0
	case slope == 0:
		p.MaxCtx = limit
	default:
		cells := uint64(ctxPad) + (usable-t1)/(slope/ctxPad)
		p.MaxCtx = int(min(cells/ctxPad*ctxPad, uint64(limit)))
		p.MaxCtx = max(p.MaxCtx-p.MaxCtx%ctxPad, 0)
	}
	argCtx := o.Ctx
	if !p.Fits && p.MaxCtx > 0 {
		argCtx = p.MaxCtx
	}
	p.Args = args(model, proj, o, m, ub, argCtx, useMTP)
	return p
}

func components(model Facts, proj *Facts, o resolved, ub, ctx int, useMTP, gpuProj, swap bool) []Component {
	cells := uint64(padCtx(ctx))
	var cs []Component
	add := func(name string, bytes, perTok uint64, note string) {
		cs = append(cs, Component{Name: name, Bytes: bytes, PerToken: perTok, Note: note})
	}
	note := fmt.Sprintf("%s of tensors; the %s token embedding stays in host memory", mib(model.WeightBytes), mib(model.HostBytes))
	if o.CPU {
		note = mib(model.WeightBytes) + " of tensors, all in RAM (mmap: the page cache holds them)"
	}
	add("weights", model.WeightBytes-model.HostBytes+model.GPUCopyBytes, 0, note)
	kvTok := kvPerToken(model.Attn, o.k, o.v)
	add("KV cache", kvTok*cells, kvTok, fmt.Sprintf("%d attention layers, %s/%s, %d B/token", len(model.Attn), o.k, o.v, kvTok))
	if model.RecurrentSeqBytes > 0 {
		copies := uint64(o.Parallel)
		if useMTP {
			copies *= uint64(1 + o.DraftMax)
		}
		add("recurrent state", model.RecurrentSeqBytes*copies, 0,
			fmt.Sprintf("%d layers × %d sequence copies (rollback under speculation)", model.RecurrentLayers, copies))
	}
	maskTok, fixed := computePerToken(model, o, ub, false)
	add("compute", fixed+maskTok*cells, maskTok, fmt.Sprintf("ubatch %d; the attention mask is n_ctx × ubatch × 2 B", ub))
	var mtpBytes, mtpTok uint64
	if useMTP {
		kvd := kvPerToken(model.NextNAttn, o.draft, o.draft)
		mTok, mFixed := computePerToken(model, o, ub, true)
		mtpTok = kvd + mTok
		mtpBytes = mFixed + mtpTok*cells
		if !swap {
			add("MTP KV", kvd*cells, kvd, fmt.Sprintf("draft context, %s, %d B/token", o.draft, kvd))
			add("MTP compute", mFixed+mTok*cells, mTok, "draft context's compute buffer")
		}
	}
	var projBytes uint64
	if gpuProj {
		patches := encoderPatches(proj.Projector, o.imageTokens)
		enc := encoderCompute(proj.Projector, patches)
		var staging uint64
		if !o.CPU {
			staging = encoderStaging(proj.Projector, o.imageTokens)
		}
		projBytes = proj.WeightBytes + enc + staging
		if !swap {
			add("projector", proj.WeightBytes, 0, proj.Projector.Type)
			add("encoder compute", enc, 0, fmt.Sprintf("largest image: %d tokens (%d patches)", o.imageTokens, patches))
			if staging > 0 {
				add("encoder staging", staging, 0, "GPU backend memory an encode grows beyond the reservation")
			}
		}
	}
	if swap {
		// Only one of the two is resident at a time, so the peak is the larger.
		if mtpBytes >= projBytes {
			add("MTP draft (swaps with projector)", mtpBytes, mtpTok, fmt.Sprintf("projector+encoder need %s", mib(projBytes)))
		} else {
			add("projector (swaps with MTP draft)", projBytes, 0, fmt.Sprintf("MTP draft needs %s", mib(mtpBytes)))
		}
	}
	contexts := uint64(1)
	if useMTP {
		contexts++
	}
	if gpuProj {
		contexts++
	}
	if swap {
		contexts = min(contexts, 2) // the draft context and the encoder take turns
	}
	note = "CUDA/Vulkan context of the server process"
	if o.CPU {
		contexts = 1 // no GPU contexts: Overhead is 0 there
	} else if contexts > 1 {
		note += fmt.Sprintf(", + %s for each further context (MTP draft, vision encoder)", mib(contextOverhead))
	}
	add("driver context", driverContext(o.Overhead, contexts), 0, note)
	return cs
}

// driverContext is the memory a device holds beyond the server's buffers when contexts of the server (main,
// MTP draft, encoder) have buffers on it: overhead for the first, contextOverhead for each further one.
func driverContext(overhead, contexts uint64) uint64 {
	if overhead == 0 || contexts <= 1 {
		return overhead
	}
	return overhead + (contexts-1)*contextOverhead
}

// kvPerToken is the KV bytes per context cell over layers.
func kvPerToken(layers []AttnLayer, k, v gguf.Type) uint64 {
	var n uint64
	for _, l := range layers {
		n += k.RowBytes(uint64(l.KeyDim*l.HeadKV)) + v.RowBytes(uint64(l.ValDim*l.HeadKV))
	}
	return n
}

// computePerToken estimates a context's compute buffer as perCell×n_ctx + fixed. With flash attention the F16
// mask (n_ctx × ubatch × 2 B) dominates at long contexts; without it the F32 KQ matrices of the widest layer do.
// The ubatch-proportional activations are a fit to llama.cpp's reservations (see README.md).
func computePerToken(m Facts, o resolved, ub int, mtp bool) (perCell, fixed uint64) {
	u := uint64(ub)
	if o.NoFlashAttn {
		// F32 mask plus one F32 KQ matrix of the widest layer: 564 MiB measured at 16K × 512 × 16 heads. At 64K
		// docs/engine-notes.md §7 saw about twice the KQ term (4,248 MiB): the estimate may be low there.
		perCell = u*4 + u*uint64(max(m.MaxHeads, 1))*4
	} else {
		perCell = u * 2
	}
	e := uint64(m.EmbedDim)
	var ffn uint64
	if m.Experts > 0 {
		used := uint64(max(m.ExpertsUsed, 1))
		ffn = e*used + used*uint64(m.ExpertFF) + uint64(m.SharedExpertFF)
	} else {
		// Fit to llama-server's Vulkan reservations on the H200 for two dense shapes (n_embd 2048/4096, FFN
		// 5632/11008): 100 and 199 KB per ubatch token beyond the mask.
		ffn = 7*e + 2*uint64(m.FFDim)
	}
	act := ffn
	if !mtp && m.RecurrentLayers > 0 {
		act += uint64(m.ConvChannels) + 2*uint64(m.InnerDim)
	}
	fixed = 4 * act * u
	if !mtp {
		fixed += 4 * uint64(m.Vocab) * uint64(max(o.Parallel, 1)) // logits of the last token of each sequence
	}
	return perCell, fixed
}

// encoderCompute is the vision encoder's compute buffer for an image of the given patches, a fit to
// llama-server's reservations (see README.md).
func encoderCompute(p *Projector, patches int) uint64 {
	if p.Dynamic {
		// Qwen-VL with flash attention: linear in the patches. 248.1 MiB reserved for the 2116-token (8,464-patch)
		// warm-up image of Qwen3.6's projector (n_embd 1152) on the CPU and the H200 alike: 20/3 × n_embd floats.
		return uint64(patches) * 4 * 20 * uint64(p.EmbedDim) / 3
	}
	// CLIP/SigLIP (LLaVA-style): 17 MiB measured for a CLIP-L/14 at 336 px, about 8 × n_embd floats per patch.
	return uint64(patches) * 4 * 8 * uint64(p.EmbedDim)
}

// encoderStaging is the GPU memory encoding the largest image (tokens after merging) adds beyond the encoder's
// reservation, measured for Qwen-VL only: on the H200 through Vulkan NVML's use grew 101.7 MiB more than the
// reservation at 14,400 patches (2560×1440) and 119.1 MiB more at 16,384 (2048×2048), about 6.5 B per patch and
// n_embd; it stays allocated after the encode, as the reservation does. The warm-up reservation at load does not
// grow it (NVML saw the plain driver context then), so it follows the largest image actually sent.
func encoderStaging(p *Projector, tokens int) uint64 {
	if !p.Dynamic {
		return 0 // not measured for CLIP/SigLIP; their encodes are small
	}
	m := max(p.MergeSize, 1)
	return uint64(tokens*m*m) * uint64(p.EmbedDim) * 13 / 2
}

func args(model Facts, proj *Facts, o resolved, m Mode, ub, ctx int, useMTP bool) []string {
	ngl := "999"
	if o.CPU {
		ngl = "0"
	}
	a := []string{"-m", model.Path, "-c", strconv.Itoa(ctx), "-ngl", ngl}
	if o.NoFlashAttn {
		a = append(a, "-fa", "off")
	} else {
		a = append(a, "-fa", "on")
	}
	a = append(a, "-ctk", o.k.String(), "-ctv", o.v.String(), "-ub", strconv.Itoa(ub), "-b", strconv.Itoa(max(ub, 2048)),
		"-np", strconv.Itoa(o.Parallel), "--fit", "off")
	if useMTP {
		a = append(a, "--spec-type", "draft-mtp", "--spec-draft-n-max", strconv.Itoa(o.DraftMax))
		if o.draft != gguf.TypeF16 {
			a = append(a, "-ctkd", o.draft.String(), "-ctvd", o.draft.String())
		}
	}
	if proj != nil && m != ModeTextOnly {
		a = append(a, "--mmproj", proj.Path)
		switch m {
		case ModeVisionCPU:
			a = append(a, "--no-mmproj-offload")
		case ModeSwap:
			a = append(a, "--mmproj-gpu-swap")
		}
		if o.capTokens > 0 {
			a = append(a, "--image-max-tokens", strconv.Itoa(o.capTokens))
		}
	}
	return a
}

func padCtx(n int) int { return (n + ctxPad - 1) / ctxPad * ctxPad }

func sum(cs []Component) uint64 {
	var n uint64
	for _, c := range cs {
		n += c.Bytes
	}
	return n
}
