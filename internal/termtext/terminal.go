package termtext

import "os"

// IsTerminal reports whether f is a character device that is not /dev/null: a terminal, for deciding whether
// to read a piped prompt, draw progress in place, or show stored text cleaned.
func IsTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
