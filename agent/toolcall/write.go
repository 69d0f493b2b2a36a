package toolcall

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteInspection reads one raw model output from r and writes the calls visor would find in it (Inspect) to w
// as one indented JSON object: `visor toolcalls parse`, whose output shape users rely on to debug their chat
// templates.
func WriteInspection(r io.Reader, f Format, ts *ToolSet, w io.Writer) error {
	data, err := io.ReadAll(io.LimitReader(r, maxParseInput+1))
	if err != nil {
		return fmt.Errorf("read the model output from stdin: %w", err)
	}
	if len(data) > maxParseInput {
		return fmt.Errorf("stdin holds more than %d MiB: give one assistant message", maxParseInput>>20)
	}
	rep, err := Inspect(data, f, ts)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// maxParseInput bounds what WriteInspection reads: far more than one assistant message.
const maxParseInput = 64 << 20
