package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/textcut"
)

// ExportVersion names the JSON export format; it changes when the format changes incompatibly.
const ExportVersion = "visor.session.v1"

// Export writes the session's full history (as Messages returns it) to w.
//
// format "md": readable Markdown. Images are written to imageDir as <sha256><ext> and linked by file name,
// so the Markdown belongs in imageDir too ("next to the markdown"); with imageDir empty they are listed,
// not written. format "json": one JSON document (ExportVersion) with images embedded as base64 and tool
// call arguments kept verbatim (a string when they are not valid JSON); imageDir is unused.
func (s *Store) Export(ctx context.Context, sessionID, format string, w io.Writer, imageDir string) error {
	if format != "md" && format != "markdown" && format != "json" {
		return fmt.Errorf("memory: export %q: unknown format %q (want md or json): %w", sessionID, format, ErrInvalidInput)
	}
	// One snapshot, so the messages, runs and events agree with each other.
	var sess Session
	var msgs []Message
	var runs []ToolRun
	var events []EngineEvent
	err := s.readTx(ctx, func(q querier) error {
		var err error
		if sess, err = getSession(ctx, q, sessionID); err != nil {
			return err
		}
		if msgs, err = history(ctx, q, sessionID, 0); err != nil {
			return err
		}
		if runs, err = toolRuns(ctx, q, sessionID); err != nil {
			return err
		}
		events, err = engineEvents(ctx, q, sessionID, 0)
		return err
	})
	if err != nil {
		return err
	}
	if format == "json" {
		return exportJSON(sess, msgs, runs, events, w)
	}
	return exportMarkdown(sess, msgs, runs, w, imageDir)
}

type jsonExport struct {
	Format       string          `json:"format"`
	Session      jsonSession     `json:"session"`
	Messages     []jsonMessage   `json:"messages"`
	ToolRuns     []jsonToolRun   `json:"tool_runs,omitempty"`
	EngineEvents []jsonEngineEvt `json:"engine_events,omitempty"`
}

type jsonSession struct {
	ID              string    `json:"id"`
	Title           string    `json:"title,omitempty"`
	Agent           string    `json:"agent,omitempty"`
	Model           string    `json:"model,omitempty"`
	EngineProfile   string    `json:"engine_profile,omitempty"`
	ParentID        string    `json:"parent_id,omitempty"`
	LinkKind        string    `json:"link_kind,omitempty"`
	InheritFrom     int64     `json:"inherit_from,omitempty"`
	InheritTo       int64     `json:"inherit_to,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	PromptTokens    int64     `json:"prompt_tokens"`
	CachedTokens    int64     `json:"cached_tokens"`
	GeneratedTokens int64     `json:"generated_tokens"`
}

type jsonMessage struct {
	ID           int64          `json:"id"`
	SessionID    string         `json:"session_id"`
	Role         string         `json:"role"`
	Content      string         `json:"content,omitempty"`
	Reasoning    string         `json:"reasoning,omitempty"`
	ToolCalls    []jsonToolCall `json:"tool_calls,omitempty"`
	ToolCallID   string         `json:"tool_call_id,omitempty"`
	ToolName     string         `json:"tool_name,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Images       []jsonImage    `json:"images,omitempty"`
	Timings      *jsonTimings   `json:"timings,omitempty"`
	Interrupted  bool           `json:"interrupted,omitempty"`
	CreatedAt    time.Time      `json:"created_at"`
}

type jsonToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type jsonImage struct {
	SHA256 string `json:"sha256"`
	MIME   string `json:"mime"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Data   []byte `json:"data"` // base64
}

type jsonTimings struct {
	PromptTokens       int     `json:"prompt_tokens"`
	CachedTokens       int     `json:"cached_tokens"`
	GeneratedTokens    int     `json:"generated_tokens"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	TokensPerSecond    float64 `json:"tokens_per_second"`
	DraftTokens        int     `json:"draft_tokens"`
	DraftAccepted      int     `json:"draft_accepted"`
	TimeToFirstTokenMS float64 `json:"time_to_first_token_ms"`
	DurationMS         float64 `json:"duration_ms"`
}

type jsonToolRun struct {
	ID         int64           `json:"id"`
	SessionID  string          `json:"session_id"`
	MessageID  int64           `json:"message_id,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Result     string          `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	StartedAt  time.Time       `json:"started_at"`
}

type jsonEngineEvt struct {
	ID         int64           `json:"id"`
	Kind       string          `json:"kind"`
	At         time.Time       `json:"at"`
	DurationMS float64         `json:"duration_ms"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// rawOrString keeps valid JSON as is and wraps anything else as a JSON string, so a model's broken tool
// arguments are exported verbatim instead of failing the export.
func rawOrString(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b)) // a string always marshals
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func exportJSON(sess Session, msgs []Message, runs []ToolRun, events []EngineEvent, w io.Writer) error {
	out := jsonExport{Format: ExportVersion, Session: jsonSession{
		ID: sess.ID, Title: sess.Title, Agent: sess.Agent, Model: sess.Model, EngineProfile: sess.EngineProfile,
		ParentID: sess.ParentID, LinkKind: sess.LinkKind, InheritFrom: sess.InheritFrom, InheritTo: sess.InheritTo,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, PromptTokens: sess.PromptTokens,
		CachedTokens: sess.CachedTokens, GeneratedTokens: sess.GeneratedTokens,
	}, Messages: []jsonMessage{}}
	for _, m := range msgs {
		jm := jsonMessage{ID: m.ID, SessionID: m.SessionID, Role: m.Role, Content: m.Content, Reasoning: m.Reasoning,
			ToolCallID: m.ToolCallID, ToolName: m.ToolName, FinishReason: m.FinishReason, Interrupted: m.Interrupted,
			CreatedAt: m.CreatedAt}
		for _, c := range m.ToolCalls {
			jm.ToolCalls = append(jm.ToolCalls, jsonToolCall{ID: c.ID, Name: c.Name, Arguments: rawOrString(c.Arguments)})
		}
		for _, img := range m.Images {
			jm.Images = append(jm.Images, jsonImage{SHA256: img.SHA256, MIME: img.MIME, Width: img.Width, Height: img.Height, Data: img.Data})
		}
		if t := m.Timings; t != nil {
			jm.Timings = &jsonTimings{PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens,
				GeneratedTokens: t.GeneratedTokens, PromptPerSecond: t.PromptPerSecond, TokensPerSecond: t.TokensPerSecond,
				DraftTokens: t.DraftTokens, DraftAccepted: t.DraftAccepted, TimeToFirstTokenMS: ms(t.TimeToFirstToken),
				DurationMS: ms(t.Duration)}
		}
		out.Messages = append(out.Messages, jm)
	}
	for _, r := range runs {
		out.ToolRuns = append(out.ToolRuns, jsonToolRun{ID: r.ID, SessionID: r.SessionID, MessageID: r.MessageID,
			CallID: r.CallID, Name: r.Name, Arguments: rawOrString(r.Arguments), Result: r.Result, Error: r.Error,
			DurationMS: ms(r.Duration), StartedAt: r.StartedAt})
	}
	for _, ev := range events {
		out.EngineEvents = append(out.EngineEvents, jsonEngineEvt{ID: ev.ID, Kind: string(ev.Kind), At: ev.At,
			DurationMS: ms(ev.Duration), Detail: rawOrString(ev.Detail)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("memory: export %q as json: %w", sess.ID, err)
	}
	return nil
}

func exportMarkdown(sess Session, msgs []Message, runs []ToolRun, w io.Writer, imageDir string) error {
	var b strings.Builder
	title := sess.Title
	if title == "" {
		title = "Session " + sess.ID
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "- id: `%s`\n", sess.ID)
	for _, kv := range [][2]string{{"agent", sess.Agent}, {"model", sess.Model}, {"engine profile", readableProfile(sess.EngineProfile)}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "- %s: %s\n", kv[0], kv[1])
		}
	}
	if sess.ParentID != "" {
		fmt.Fprintf(&b, "- %s of `%s`", sess.LinkKind, sess.ParentID)
		if sess.InheritTo != 0 {
			fmt.Fprintf(&b, " (messages up to %d)", sess.InheritTo)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- created: %s, updated: %s\n", sess.CreatedAt.Format(time.RFC3339), sess.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(&b, "- tokens: %d prompt (%d cached), %d generated\n\n", sess.PromptTokens, sess.CachedTokens, sess.GeneratedTokens)

	runsByCall := map[string]ToolRun{}
	for _, r := range runs {
		if r.CallID != "" {
			runsByCall[r.CallID] = r
		}
	}
	written := map[string]bool{}
	for _, m := range msgs {
		fmt.Fprintf(&b, "## %s", m.Role)
		if m.ToolName != "" {
			fmt.Fprintf(&b, " · %s", m.ToolName)
		}
		fmt.Fprintf(&b, " <sub>#%d %s</sub>\n\n", m.ID, m.CreatedAt.Format(time.RFC3339))
		if m.Reasoning != "" {
			fmt.Fprintf(&b, "<details><summary>reasoning</summary>\n\n%s\n\n</details>\n\n", m.Reasoning)
		}
		if m.Content != "" {
			if m.Role == "tool" {
				writeFence(&b, "", m.Content)
			} else {
				b.WriteString(m.Content + "\n\n")
			}
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "**call** `%s`", c.Name)
			if r, ok := runsByCall[c.ID]; ok {
				fmt.Fprintf(&b, " (ran %s", r.Duration.Round(time.Millisecond))
				if r.Error != "" {
					fmt.Fprintf(&b, ", error: %s", oneLine(r.Error))
				}
				b.WriteString(")")
			}
			b.WriteString("\n\n")
			writeFence(&b, "json", string(c.Arguments))
		}
		for i, img := range m.Images {
			name := img.SHA256 + extensionFor(img.MIME)
			if imageDir == "" {
				fmt.Fprintf(&b, "*image %d: %s, %d×%d, %s as sent to the model, sha256 %s (not exported)*\n\n", i+1, img.MIME,
					img.Width, img.Height, images.Size(len(img.Data)), img.SHA256)
				continue
			}
			if !written[name] {
				if err := writeImageFile(filepath.Join(imageDir, name), img.Data); err != nil {
					return fmt.Errorf("memory: export %q: %w", sess.ID, err)
				}
				written[name] = true
			}
			fmt.Fprintf(&b, "![image %d (%dx%d)](%s)\n\n", i+1, img.Width, img.Height, name)
		}
		if t := m.Timings; t != nil {
			fmt.Fprintf(&b, "<sub>%d prompt (%d cached) · %d generated · %.1f tok/s · first token %s",
				t.PromptTokens, t.CachedTokens, t.GeneratedTokens, t.TokensPerSecond, t.TimeToFirstToken.Round(time.Millisecond))
			if t.DraftTokens > 0 {
				fmt.Fprintf(&b, " · drafts %d/%d accepted", t.DraftAccepted, t.DraftTokens)
			}
			b.WriteString("</sub>\n\n")
		}
		if m.Interrupted {
			b.WriteString("*(interrupted)*\n\n")
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("memory: export %q as markdown: %w", sess.ID, err)
	}
	return nil
}

// readableProfile is a stored engine profile for a person: a JSON object's set fields as "key value" in their
// stored order ("path m.gguf, parallel 1, plan off"), not the object itself; any other text as it is.
func readableProfile(stored string) string {
	dec := json.NewDecoder(strings.NewReader(stored))
	dec.UseNumber()
	var fields map[string]any
	if err := json.Unmarshal([]byte(stored), &fields); err != nil {
		return stored
	}
	var parts []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return stored
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return stored
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return stored
		}
		if sub, ok := v.(map[string]any); ok { // an embedded object's fields read as the profile's own
			if inner, err := json.Marshal(sub); err == nil {
				if r := readableProfile(string(inner)); r != "" {
					parts = append(parts, r)
				}
			}
			continue
		}
		var val string
		switch v := v.(type) {
		case nil:
		case []any:
			words := make([]string, len(v))
			for i, w := range v {
				words[i] = fmt.Sprint(w)
			}
			val = strings.Join(words, " ")
		default:
			val = fmt.Sprint(v)
		}
		if val != "" && val != "0" && val != "false" {
			parts = append(parts, strings.ToLower(key)+" "+val)
		}
	}
	return strings.Join(parts, ", ")
}

// writeFence writes text in a code fence longer than any backtick run inside it, so content cannot end it.
func writeFence(b *strings.Builder, lang, text string) {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "%s%s\n%s\n%s\n\n", fence, lang, strings.TrimRight(text, "\n"), fence)
}

func oneLine(s string) string { return textcut.Line(s, 200) }

// writeImageFile writes an image unless an identical file (same name = same sha256) is already there. The names
// are predictable, so anything else already at one (a symlink planted to redirect the write, a file with other
// content) is refused, never written through or over; a new file is created exclusively, which no symlink
// survives either.
func writeImageFile(path string, data []byte) error {
	if st, err := os.Lstat(path); err == nil {
		if !st.Mode().IsRegular() {
			return inputError(fmt.Sprintf("write image %s: the name is taken by %s, which the export will not write through: remove it or export into an empty folder",
				path, describeMode(st.Mode())))
		}
		if st.Size() == int64(len(data)) {
			if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
				return nil
			}
		}
		return inputError(fmt.Sprintf("write image %s: a different file has that name: remove it or export into an empty folder", path))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write image %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write image %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write image %s: %w", path, err)
	}
	return nil
}

// describeMode names a file type for an error.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a folder"
	}
	return "a special file"
}
