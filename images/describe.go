package images

import "fmt"

// Describe says what intake made of an image: its name, the size it was given at and, when intake resized it,
// the size it is sent at ("shot.png 1920×1080 412 KB → 1288×720 96 KB"). A user who attached a 400 KB screenshot
// and read "3 KB" could not tell the model's view was reduced, nor by how much; each size appears once.
// An empty name leaves the name out.
func Describe(name string, given, sent []byte) string {
	d := dims(given) + " " + Size(len(given))
	if len(sent) != len(given) || dims(sent) != dims(given) {
		d += " → " + dims(sent) + " " + Size(len(sent))
	}
	if name == "" {
		return d
	}
	return name + " " + d
}

func dims(data []byte) string {
	h, err := ReadHeader(data)
	if err != nil || h.Width <= 0 || h.Height <= 0 {
		return "?×?"
	}
	return fmt.Sprintf("%d×%d", h.Width, h.Height)
}

// Size is n bytes for a person: decimal units (as file managers show them), one decimal below 10 of a unit.
func Size(n int) string {
	if n < 1000 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, unit := float64(n)/1000, "KB"
	for _, u := range []string{"MB", "GB"} {
		if f < 999.5 {
			break
		}
		f, unit = f/1000, u
	}
	if f < 10 {
		return fmt.Sprintf("%.1f %s", f, unit)
	}
	return fmt.Sprintf("%.0f %s", f, unit)
}
