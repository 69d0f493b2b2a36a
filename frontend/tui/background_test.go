package tui

import (
	"context"
	"image/color"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// TestLightTerminalGetsLightStyles: when the terminal says its background is light, answers are rendered with
// the light markdown style and the input with the light styles, so an answer is not light grey on white (the
// dark style's text colour, 252) and the input line is not a black bar; a dark background keeps the dark ones.
func TestLightTerminalGetsLightStyles(t *testing.T) {
	answer := func(bg color.Color) (string, *model) {
		m := newModel(context.Background(), &recordingBackend{}, Options{})
		if cmd := m.Init(); cmd == nil {
			t.Fatal("Init starts nothing")
		}
		if bg != nil {
			m.Update(tea.BackgroundColorMsg{Color: bg})
		}
		m.entries = append(m.entries, entry{kind: assistantEntry, text: "Hi, **there**!"})
		m.refresh()
		return m.render(&m.entries[len(m.entries)-1], 80), m
	}
	darkText, dark := answer(nil)
	if !strings.Contains(darkText, "38;5;252") {
		t.Fatalf("the dark style's text colour is not 252 any more; this test's marker is stale: %q", darkText)
	}
	lightText, light := answer(color.White)
	if strings.Contains(lightText, "38;5;252") || !strings.Contains(lightText, "there") {
		t.Errorf("on a light background the answer is %q: light grey (252) on white", lightText)
	}
	if againText, _ := answer(color.Black); againText != darkText {
		t.Errorf("a dark background changed the rendering: %q, want %q", againText, darkText)
	}
	if bg := light.input.Styles().Focused.CursorLine.GetBackground(); bg != lipgloss.Color("255") {
		t.Errorf("light input line background %v, want the light style's 255", bg)
	}
	if bg := dark.input.Styles().Focused.CursorLine.GetBackground(); bg != lipgloss.Color("0") {
		t.Errorf("dark input line background %v, want 0", bg)
	}
}
