package tui

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textarea"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/glamour/v2"
	"charm.land/lipgloss/v2"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/textcut"
	"github.com/visorhq/visor/internal/typo"
	"github.com/visorhq/visor/internal/userpath"
)

// Options configure Run.
type Options struct {
	Input  io.Reader // default: the terminal
	Output io.Writer // default: the terminal
	// History seeds the transcript (a resumed session); Recall seeds line history (earlier user messages).
	History []agent.Message
	// Width and Height fix the size instead of asking the terminal (tests).
	Width, Height int
}

// Help is the text /help shows.
const Help = `Enter sends · Alt+Enter or Ctrl+J adds a line · ↑/↓ recall earlier messages · PgUp/PgDn scroll
Ctrl+C cancels the running answer (at an empty prompt: twice to quit) · Ctrl+D quits · Ctrl+O folds/unfolds tool calls
/image PATH   attach an image to the next message (Tab completes the path; ~ works); dropping a file does it too
/clear        drop the attached images
/sessions     pick a stored session to continue
/session      show this session's id
/help         this help
/quit         leave`

// Run runs the terminal chat until the user quits or ctx ends.
func Run(ctx context.Context, b Backend, o Options) error {
	m := newModel(ctx, b, o)
	opts := []tea.ProgramOption{tea.WithContext(ctx)}
	if o.Input != nil {
		opts = append(opts, tea.WithInput(o.Input))
	}
	if o.Output != nil {
		opts = append(opts, tea.WithOutput(o.Output))
	}
	if o.Width > 0 && o.Height > 0 {
		opts = append(opts, tea.WithWindowSize(o.Width, o.Height))
	}
	_, err := tea.NewProgram(m, opts...).Run()
	m.stop()
	if err != nil && ctx.Err() != nil {
		return nil // the command was told to stop (SIGTERM): not an error of the chat
	}
	return err
}

type entryKind int

const (
	userEntry entryKind = iota
	assistantEntry
	reasoningEntry
	callEntry
	resultEntry
	noticeEntry
	errorEntry
)

type entry struct {
	kind  entryKind
	text  string
	title string // a call's or result's one-line head
	isErr bool

	rendered      string // cache for markdown, valid at renderedWidth while not streaming
	renderedWidth int
	streaming     bool
}

// Messages the program receives.
type (
	eventMsg    struct{ ev agent.Event }
	turnDoneMsg struct{ f agent.Finished }
	tickMsg     struct{}
	attachedMsg struct {
		desc string
		err  error
	}
	sessionsMsg struct {
		list []SessionInfo
		err  error
	}
	resumedMsg struct {
		id      string
		history []agent.Message
		err     error
	}
)

type model struct {
	ctx context.Context
	b   Backend

	width, height int
	input         textarea.Model
	vp            viewport.Model
	md            *glamour.TermRenderer
	mdWidth       int

	entries  []entry
	expanded bool // tool calls, results and reasoning shown whole
	follow   bool // the transcript sticks to its end while answers stream
	dirty    bool

	running  bool
	cancel   context.CancelFunc
	events   chan tea.Msg
	canceled bool

	recall    []string // sent messages, oldest first
	recallIdx int      // len(recall): not recalling
	draft     string

	attached  []string
	quitArmed time.Time
	notice    string
	status    Status

	picker *picker
	light  bool // the terminal's background is light
}

type picker struct {
	list []SessionInfo
	sel  int
}

func newModel(ctx context.Context, b Backend, o Options) *model {
	in := textarea.New()
	in.Prompt = "› "
	in.ShowLineNumbers = false
	in.Placeholder = "Ask something · /help"
	in.SetHeight(2)
	in.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j"))
	in.KeyMap.DeleteCharacterForward = key.NewBinding(key.WithKeys("delete")) // ctrl+d quits
	in.Focus()
	m := &model{ctx: ctx, b: b, input: in, vp: viewport.New(), follow: true, width: 80, height: 24}
	m.vp.SoftWrap = true
	m.vp.KeyMap = viewport.KeyMap{} // keys go to the input; PgUp/PgDn are routed by hand
	m.loadHistory(o.History)
	m.status = b.Status()
	m.dirty = true
	return m
}

func (m *model) stop() {
	if m.cancel != nil {
		m.cancel()
	}
}

func (m *model) loadHistory(h []agent.Message) {
	m.entries, m.recall = nil, nil
	for _, msg := range h {
		switch msg.Role {
		case "user":
			text := msg.Content
			if n := len(msg.Images); n > 0 {
				text = fmt.Sprintf("[%d image%s] %s", n, plural(n), text)
			}
			m.entries = append(m.entries, entry{kind: userEntry, text: text})
			m.recall = append(m.recall, msg.Content)
		case "assistant":
			if msg.Reasoning != "" {
				m.entries = append(m.entries, entry{kind: reasoningEntry, text: msg.Reasoning})
			}
			if strings.TrimSpace(msg.Content) != "" {
				m.entries = append(m.entries, entry{kind: assistantEntry, text: msg.Content})
			}
			for _, c := range msg.ToolCalls {
				m.entries = append(m.entries, entry{kind: callEntry, title: callTitle(c)})
			}
		case "tool":
			m.entries = append(m.entries, entry{kind: resultEntry, title: msg.ToolName, text: msg.Content, isErr: msg.IsError})
		}
	}
	m.recallIdx = len(m.recall)
}

// Init asks the terminal for its background: the input's and the answers' colours are chosen for a dark one
// until it answers (a light one showed answers in light grey on white, and the input on a black bar).
func (m *model) Init() tea.Cmd { return tea.Batch(textarea.Blink, tick(), tea.RequestBackgroundColor) }

func tick() tea.Cmd {
	return tea.Tick(100*time.Millisecond, func(time.Time) tea.Msg { return tickMsg{} })
}

func waitEvent(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return nil
		}
		return msg
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layout()
		m.dirty = true
		return m, nil
	case tea.BackgroundColorMsg:
		m.setLight(!msg.IsDark())
		return m, nil
	case tickMsg:
		m.status = m.b.Status()
		if m.dirty {
			m.refresh()
		}
		return m, tick()
	case eventMsg:
		m.apply(msg.ev)
		return m, waitEvent(m.events)
	case turnDoneMsg:
		m.finish(msg.f)
		return m, nil
	case attachedMsg:
		if msg.err != nil {
			m.addNotice(errorEntry, msg.err.Error())
		} else {
			m.attached = append(m.attached, msg.desc)
			m.notice = "encoding it while you type" // the 📎 list beside it names the image and its sizes
		}
		m.status = m.b.Status()
		return m, nil
	case sessionsMsg:
		if msg.err != nil {
			m.addNotice(errorEntry, msg.err.Error())
		} else if len(msg.list) == 0 {
			m.notice = "no stored sessions"
		} else {
			m.picker = &picker{list: msg.list}
		}
		return m, nil
	case resumedMsg:
		if msg.err != nil {
			m.addNotice(errorEntry, msg.err.Error())
			return m, nil
		}
		m.loadHistory(msg.history)
		m.attached = nil
		m.notice = "resumed session " + short(msg.id)
		m.status = m.b.Status()
		m.follow, m.dirty = true, true
		return m, nil
	case tea.PasteMsg:
		if paths := droppedImages(msg.Content); len(paths) > 0 && m.picker == nil {
			return m, m.attachCmds(paths)
		}
	case tea.MouseWheelMsg:
		var cmd tea.Cmd
		m.vp, cmd = m.vp.Update(msg)
		m.follow = m.vp.AtBottom()
		return m, cmd
	case tea.KeyPressMsg:
		if m.picker != nil {
			return m, m.pickerKey(msg)
		}
		if cmd, done := m.key(msg); done {
			return m, cmd
		}
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// key handles the chat's own keys; done is false for keys the input should get.
func (m *model) key(k tea.KeyPressMsg) (tea.Cmd, bool) {
	switch k.String() {
	case "ctrl+c":
		switch {
		case m.running:
			m.canceled = true
			m.cancel()
			m.notice = "canceling …"
		case m.input.Value() != "":
			m.input.Reset()
			m.quitArmed = time.Time{}
		case !m.quitArmed.IsZero() && time.Since(m.quitArmed) < 3*time.Second:
			return tea.Quit, true
		default:
			m.quitArmed = time.Now()
			m.notice = "press Ctrl+C again to quit"
		}
		return nil, true
	case "ctrl+d":
		if m.input.Value() == "" {
			return tea.Quit, true
		}
		return nil, true
	case "ctrl+o":
		m.expanded = !m.expanded
		m.dirty = true
		return nil, true
	case "pgup":
		m.vp.PageUp()
		m.follow = false
		return nil, true
	case "pgdown":
		m.vp.PageDown()
		m.follow = m.vp.AtBottom()
		return nil, true
	case "up":
		if m.input.LineCount() == 1 && m.recallIdx > 0 {
			if m.recallIdx == len(m.recall) {
				m.draft = m.input.Value()
			}
			m.recallIdx--
			m.input.SetValue(m.recall[m.recallIdx])
			return nil, true
		}
	case "down":
		if m.input.LineCount() == 1 && m.recallIdx < len(m.recall) {
			m.recallIdx++
			if m.recallIdx == len(m.recall) {
				m.input.SetValue(m.draft)
			} else {
				m.input.SetValue(m.recall[m.recallIdx])
			}
			return nil, true
		}
	case "tab":
		v := m.input.Value()
		if rest, ok := strings.CutPrefix(v, "/image "); ok {
			done, matches := completePath(rest)
			m.input.SetValue("/image " + done)
			if len(matches) > 1 {
				m.notice = strings.Join(matches, "  ")
			}
		}
		return nil, true
	case "enter":
		return m.submit(), true
	}
	m.quitArmed = time.Time{}
	return nil, false
}

func (m *model) pickerKey(k tea.KeyPressMsg) tea.Cmd {
	p := m.picker
	switch k.String() {
	case "up", "ctrl+p", "k":
		p.sel = max(0, p.sel-1)
	case "down", "ctrl+n", "j":
		p.sel = min(len(p.list)-1, p.sel+1)
	case "esc", "ctrl+c", "q":
		m.picker = nil
	case "enter":
		id := p.list[p.sel].ID
		m.picker = nil
		return func() tea.Msg {
			h, err := m.b.Resume(m.ctx, id)
			return resumedMsg{id: id, history: h, err: err}
		}
	}
	return nil
}

// submit acts on the input line: a command, or a message to send.
func (m *model) submit() tea.Cmd {
	text := strings.TrimSpace(m.input.Value())
	if text == "" {
		return nil
	}
	if m.running {
		m.notice = "an answer is streaming: wait for it, or Ctrl+C cancels it"
		return nil
	}
	m.input.Reset()
	m.notice = ""
	if len(m.recall) == 0 || m.recall[len(m.recall)-1] != text {
		m.recall = append(m.recall, text)
	}
	m.recallIdx = len(m.recall)
	switch cmd, arg, _ := strings.Cut(text, " "); cmd {
	case "/quit", "/exit":
		return tea.Quit
	case "/help":
		m.addNotice(noticeEntry, Help)
		return nil
	case "/clear":
		m.b.Detach()
		m.attached = nil
		m.notice = "attachments dropped"
		return nil
	case "/session":
		m.addNotice(noticeEntry, "session "+m.b.Status().Session)
		return nil
	case "/sessions":
		return func() tea.Msg {
			l, err := m.b.Sessions(m.ctx)
			return sessionsMsg{list: l, err: err}
		}
	case "/image":
		p := strings.TrimSpace(arg)
		if p == "" {
			m.notice = "/image PATH: which file? (Tab completes)"
			return nil
		}
		if words := splitShellWords(p); len(words) == 1 {
			p = words[0]
		}
		return m.attachCmds([]string{userpath.Expand(p)})
	}
	if strings.HasPrefix(text, "/") && !strings.Contains(strings.Fields(text)[0][1:], "/") {
		m.addNotice(errorEntry, unknownCommand(strings.Fields(text)[0]))
		return nil
	}
	return m.send(text)
}

// commands are the slash commands submit knows, for the hint a typo of one gets.
var commands = []string{"/quit", "/exit", "/help", "/clear", "/session", "/sessions", "/image"}

// unknownCommand is the notice for a slash word that is no command (a path such as /tmp/x.png is sent as text):
// a typo of a command is told what it was meant to be, as the command line tells typos of its flags.
func unknownCommand(word string) string {
	if near := typo.Nearest(word, commands); near != "" {
		return fmt.Sprintf("unknown command %s: did you mean %s? (/help lists them)", word, near)
	}
	return fmt.Sprintf("unknown command %s: /help lists them", word)
}

func (m *model) attachCmds(paths []string) tea.Cmd {
	if m.running {
		m.notice = "attach after the answer (or Ctrl+C it)"
		return nil
	}
	var cmds []tea.Cmd
	for _, p := range paths {
		cmds = append(cmds, func() tea.Msg {
			desc, err := m.b.Attach(m.ctx, p)
			return attachedMsg{desc: desc, err: err}
		})
	}
	return tea.Sequence(cmds...)
}

func (m *model) send(text string) tea.Cmd {
	user := text
	if n := len(m.attached); n > 0 {
		user = fmt.Sprintf("[%d image%s] %s", n, plural(n), text)
	}
	m.entries = append(m.entries, entry{kind: userEntry, text: user})
	m.attached = nil
	m.running, m.canceled, m.follow, m.dirty = true, false, true, true
	ctx, cancel := context.WithCancel(m.ctx)
	m.cancel = cancel
	events := make(chan tea.Msg, 1024)
	m.events = events
	go func() {
		defer cancel()
		f := m.b.Send(ctx, text, func(ev agent.Event) {
			if _, ok := ev.(agent.Finished); ok {
				return // the returned Finished ends the turn
			}
			events <- eventMsg{ev}
		})
		events <- turnDoneMsg{f}
		close(events)
	}()
	return waitEvent(events)
}

// apply adds one agent event to the transcript.
func (m *model) apply(ev agent.Event) {
	m.dirty = true
	last := func(k entryKind) *entry {
		if n := len(m.entries); n > 0 && m.entries[n-1].kind == k && m.entries[n-1].streaming {
			return &m.entries[n-1]
		}
		m.closeStreaming()
		m.entries = append(m.entries, entry{kind: k, streaming: true})
		return &m.entries[len(m.entries)-1]
	}
	switch e := ev.(type) {
	case agent.Token:
		last(assistantEntry).text += e.Text
	case agent.ReasoningToken:
		last(reasoningEntry).text += e.Text
	case agent.ToolCallStarted:
		m.closeStreaming()
		m.entries = append(m.entries, entry{kind: callEntry, title: callTitle(e.Call)})
	case agent.ToolCallFinished:
		m.closeStreaming()
		m.entries = append(m.entries, entry{kind: resultEntry, title: fmt.Sprintf("%s (%s)", e.Call.Name,
			e.Duration.Round(time.Millisecond)), text: e.Result.Text, isErr: e.Result.IsError})
	case agent.ParseError:
		m.closeStreaming()
		m.entries = append(m.entries, entry{kind: noticeEntry, text: "unusable tool call: " + textcut.Line(e.Text, 200)})
	case agent.ImagesPending:
		m.notice = fmt.Sprintf("encoding %d image%s …", e.Count, plural(e.Count))
	case agent.Explain:
		m.closeStreaming()
		m.entries = append(m.entries, entry{kind: noticeEntry, text: "explain: " + e.Text})
	}
}

func (m *model) closeStreaming() {
	for i := range m.entries {
		if m.entries[i].streaming {
			m.entries[i].streaming = false
			m.entries[i].rendered = ""
		}
	}
}

func (m *model) finish(f agent.Finished) {
	m.closeStreaming()
	m.running, m.cancel, m.events = false, nil, nil
	m.notice = ""
	switch {
	case m.canceled || f.Reason == "canceled":
		m.addNotice(noticeEntry, "(answer canceled)")
	case f.Err != nil:
		m.addNotice(errorEntry, f.Err.Error())
	}
	m.status = m.b.Status()
	m.dirty = true
	m.refresh()
}

func (m *model) addNotice(k entryKind, text string) {
	m.entries = append(m.entries, entry{kind: k, text: text})
	m.follow, m.dirty = true, true
}

// layout sizes the transcript, the input and the status line to the window.
func (m *model) layout() {
	m.input.SetWidth(max(10, m.width))
	inputH := m.input.Height()
	m.vp.SetWidth(m.width)
	m.vp.SetHeight(max(1, m.height-inputH-2)) // notice line + status line
}

var (
	userStyle    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	callStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	resultStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	errStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	noticeStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("6"))
	statusStyle  = lipgloss.NewStyle().Reverse(true)
	thinkStyle   = lipgloss.NewStyle().Italic(true).Foreground(lipgloss.Color("8"))
	pickerSel    = lipgloss.NewStyle().Reverse(true)
	foldedMarker = " ▸ ctrl+o"
)

// setLight styles the input and the answers' markdown for a light (or dark) background, rendering every answer
// again.
func (m *model) setLight(light bool) {
	if light == m.light {
		return
	}
	m.light = light
	m.input.SetStyles(textarea.DefaultStyles(!light))
	m.md, m.dirty = nil, true
}

// refresh renders the transcript into the viewport.
func (m *model) refresh() {
	m.dirty = false
	w := max(20, m.width)
	if m.md == nil || m.mdWidth != w {
		r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(map[bool]string{false: "dark", true: "light"}[m.light]), glamour.WithWordWrap(w-4))
		if err == nil {
			m.md, m.mdWidth = r, w
			for i := range m.entries {
				m.entries[i].rendered = ""
			}
		}
	}
	var b strings.Builder
	for i := range m.entries {
		b.WriteString(m.render(&m.entries[i], w))
		b.WriteString("\n")
	}
	m.vp.SetContent(b.String())
	if m.follow {
		m.vp.GotoBottom()
	}
}

func (m *model) render(e *entry, w int) string {
	wrap := lipgloss.NewStyle().Width(w)
	// Every entry's text comes from the model, a tool, an MCP server or the store: it is shown, never obeyed by
	// the terminal (escapes, a carriage return that hides the text before it, bidi overrides). Cleaning the
	// whole text, not each token, keeps a sequence split across tokens whole.
	text, title := termtext.Clean(e.text), termtext.Clean(e.title)
	switch e.kind {
	case userEntry:
		return wrap.Render(userStyle.Render("you › ") + text)
	case assistantEntry:
		if e.rendered != "" && e.renderedWidth == w && !e.streaming {
			return e.rendered
		}
		out := text
		if m.md != nil {
			if r, err := m.md.Render(text); err == nil {
				out = strings.Trim(r, "\n")
			}
		}
		if !e.streaming {
			e.rendered, e.renderedWidth = out, w
		}
		return out
	case reasoningEntry:
		if !m.expanded {
			return thinkStyle.Render(fmt.Sprintf("thought for %d bytes", len(e.text)) + foldedMarker)
		}
		return wrap.Render(thinkStyle.Render(text))
	case callEntry:
		return wrap.Render(callStyle.Render("→ " + oneLineIf(title, !m.expanded, w-4)))
	case resultEntry:
		st := resultStyle
		mark := "← "
		if e.isErr {
			st, mark = errStyle, "← error: "
		}
		head := mark + title
		if !m.expanded {
			lines := strings.Count(strings.TrimRight(text, "\n"), "\n") + 1
			body := textcut.Line(text, max(10, w-len(head)-24))
			return st.Render(fmt.Sprintf("%s: %s (%d line%s)%s", head, body, lines, plural(lines), foldedMarker))
		}
		return wrap.Render(st.Render(head + "\n" + text))
	case errorEntry:
		return wrap.Render(errStyle.Render("! " + text))
	default:
		return wrap.Render(noticeStyle.Render(text))
	}
}

func (m *model) View() tea.View {
	if m.dirty && !m.running {
		m.refresh() // outside a stream, changes show at once; during one, the tick batches them
	}
	var b strings.Builder
	if m.picker != nil {
		b.WriteString(m.pickerView())
	} else {
		b.WriteString(m.vp.View())
	}
	b.WriteString("\n")
	b.WriteString(m.noticeLine())
	b.WriteString("\n")
	b.WriteString(m.input.View())
	b.WriteString("\n")
	b.WriteString(m.statusLine())
	v := tea.NewView(b.String())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "visor chat"
	return v
}

func (m *model) pickerView() string {
	var b strings.Builder
	b.WriteString(noticeStyle.Render("continue which session? ↑/↓ Enter · Esc closes") + "\n")
	h := max(1, m.vp.Height()-1)
	start := max(0, m.picker.sel-h+1)
	for i := start; i < len(m.picker.list) && i < start+h; i++ {
		s := m.picker.list[i]
		line := fmt.Sprintf("%s  %s  %-16s %3d msgs  %s", short(s.ID), s.Updated.Format("2006-01-02 15:04"),
			textcut.Line(termtext.Clean(s.Model), 16), s.Messages, termtext.Clean(s.Title))
		line = textcut.Line(line, m.width-1)
		if i == m.picker.sel {
			line = pickerSel.Render(line)
		}
		b.WriteString(line + "\n")
	}
	return lipgloss.NewStyle().Height(m.vp.Height()).MaxHeight(m.vp.Height()).Render(strings.TrimRight(b.String(), "\n"))
}

func (m *model) noticeLine() string {
	parts := []string{}
	if len(m.attached) > 0 {
		parts = append(parts, fmt.Sprintf("📎 %s", strings.Join(m.attached, ", ")))
	}
	if m.running {
		parts = append(parts, "answering … Ctrl+C cancels")
	}
	if m.notice != "" {
		parts = append(parts, m.notice)
	}
	return noticeStyle.Render(textcut.Line(termtext.Clean(strings.Join(parts, " · ")), max(10, m.width-1)))
}

// StatusLine formats s as the status line shows it.
func StatusLine(s Status) string {
	parts := []string{}
	if s.Model != "" {
		parts = append(parts, s.Model)
	}
	if s.ContextSize > 0 {
		parts = append(parts, fmt.Sprintf("ctx %d/%d (%d%%)", s.ContextUsed, s.ContextSize, 100*s.ContextUsed/s.ContextSize))
	} else if s.ContextUsed > 0 {
		parts = append(parts, fmt.Sprintf("ctx %d", s.ContextUsed))
	}
	if s.TokensPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%.1f tok/s", s.TokensPerSecond))
	}
	if s.Drafted > 0 {
		parts = append(parts, fmt.Sprintf("draft %d%% of %d", 100*s.DraftAccepted/s.Drafted, s.Drafted))
	}
	if len(s.Resident) > 0 {
		parts = append(parts, "resident: "+strings.Join(s.Resident, "+"))
	}
	if s.Ahead != "" {
		parts = append(parts, s.Ahead)
	}
	if s.Session != "" {
		parts = append(parts, "session "+short(s.Session))
	}
	return strings.Join(parts, " · ")
}

func (m *model) statusLine() string {
	return statusStyle.Width(m.width).Render(textcut.Line(" "+StatusLine(m.status), max(10, m.width-1)))
}

func callTitle(c agent.Call) string {
	return fmt.Sprintf("%s %s", c.Name, string(c.Arguments))
}

func oneLineIf(s string, fold bool, n int) string {
	if fold {
		return textcut.Line(s, n)
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
