package memory

import "strings"

// porterStem is the stem FTS5's porter tokenizer gives a token that unicode61 has already folded (lower
// case, no diacritics): M. F. Porter's 1980 algorithm, with FTS5's edges, since the FTS4 search must find
// the same words (TestPorterMatchesFTS5 compares the two on every word of this repository's text). Tokens
// shorter than 3 or longer than 64 bytes are left as they are; bytes other than a–z count as consonants.
func porterStem(w string) string {
	if len(w) < 3 || len(w) > 64 {
		return w
	}
	b := []byte(w)
	b = porterStep1(b)
	b = porterRules(b, porterStep2, measureGt0)
	b = porterRules(b, porterStep3, measureGt0)
	b = porterStep4(b)
	// Step 5a: a final e goes where the rest is long enough.
	if n := len(b); b[n-1] == 'e' {
		if m := measure(b[:n-1]); m > 1 || (m == 1 && !cvc(b[:n-1])) {
			b = b[:n-1]
		}
	}
	// Step 5b: ll to l in long words.
	if n := len(b); n > 1 && b[n-1] == 'l' && b[n-2] == 'l' && measure(b[:n-1]) > 1 {
		b = b[:n-1]
	}
	return string(b)
}

func isVowel(c byte, yIsVowel bool) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || (yIsVowel && c == 'y')
}

// consonants marks each byte of b: a y is a consonant first and after a vowel, a vowel after a consonant.
func consonant(b []byte, i int) bool {
	if i == 0 {
		return !isVowel(b[0], false)
	}
	return !isVowel(b[i], consonant(b, i-1))
}

// measure is Porter's m: the number of vowel-run–consonant-run pairs in b.
func measure(b []byte) int {
	m := 0
	prevCons := true // before the word: nothing to pair with
	sawVowel := false
	cons := false
	for i := range b {
		if i == 0 {
			cons = !isVowel(b[0], false)
		} else {
			cons = !isVowel(b[i], cons)
		}
		if !cons {
			sawVowel = true
		} else if !prevCons && sawVowel {
			m++
		}
		prevCons = cons
	}
	return m
}

// hasVowel is FTS5's *v*: a vowel anywhere, where any y but a first one counts as a vowel.
func hasVowel(b []byte) bool {
	for i, c := range b {
		if isVowel(c, i > 0) {
			return true
		}
	}
	return false
}

// cvc is Porter's *o: b ends consonant, vowel, consonant, the last not w, x or y.
func cvc(b []byte) bool {
	n := len(b)
	if n < 3 {
		return false
	}
	if c := b[n-1]; c == 'w' || c == 'x' || c == 'y' {
		return false
	}
	return consonant(b, n-1) && !consonant(b, n-2) && consonant(b, n-3)
}

func measureGt0(b []byte) bool { return measure(b) > 0 }
func measureGt1(b []byte) bool { return measure(b) > 1 }

func porterStep1(b []byte) []byte {
	// 1a: plurals.
	if n := len(b); b[n-1] == 's' {
		switch {
		case b[n-2] == 'e' && ((n > 4 && b[n-4] == 's' && b[n-3] == 's') || (n > 3 && b[n-3] == 'i')):
			b = b[:n-2]
		case b[n-2] == 'e' || b[n-2] != 's':
			b = b[:n-1]
		}
	}
	// 1b: -eed, -ed, -ing.
	removed := false
	switch n := len(b); {
	case hasSuffix(b, "eed"):
		if measureGt0(b[:n-3]) {
			b = b[:n-1]
		}
	case hasSuffix(b, "ed"):
		if hasVowel(b[:n-2]) {
			b, removed = b[:n-2], true
		}
	case hasSuffix(b, "ing"):
		if hasVowel(b[:n-3]) {
			b, removed = b[:n-3], true
		}
	}
	if removed {
		switch n := len(b); {
		case hasSuffix(b, "at"), hasSuffix(b, "bl"), hasSuffix(b, "iz"):
			b = append(b, 'e')
		case n >= 2 && b[n-1] == b[n-2] && !isVowel(b[n-1], false) && !strings.ContainsRune("lsz", rune(b[n-1])):
			b = b[:n-1]
		case measure(b) == 1 && cvc(b):
			b = append(b, 'e')
		}
	}
	// 1c: y to i after a vowel.
	if n := len(b); b[n-1] == 'y' && hasVowel(b[:n-1]) {
		b[n-1] = 'i'
	}
	return b
}

// hasSuffix: b ends in s and has something before it.
func hasSuffix(b []byte, s string) bool {
	return len(b) > len(s) && string(b[len(b)-len(s):]) == s
}

type porterRule struct{ suffix, repl string }

// porterRules applies the first rule whose suffix b has, if the rest of b meets cond. Suffixes that end
// another one come first.
func porterRules(b []byte, rules []porterRule, cond func([]byte) bool) []byte {
	for _, r := range rules {
		if hasSuffix(b, r.suffix) {
			stem := b[:len(b)-len(r.suffix)]
			if cond(stem) {
				return append(stem, r.repl...)
			}
			return b
		}
	}
	return b
}

var porterStep2 = []porterRule{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"}, {"izer", "ize"},
	{"logi", "log"}, {"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"}, {"ousli", "ous"},
	{"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"},
	{"fulness", "ful"}, {"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
}

var porterStep3 = []porterRule{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"}, {"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

var porterStep4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate",
	"iti", "ous", "ive", "ize",
}

func porterStep4(b []byte) []byte {
	for _, s := range porterStep4Suffixes {
		if hasSuffix(b, s) {
			stem := b[:len(b)-len(s)]
			ok := measureGt1(stem)
			if s == "ion" {
				c := stem[len(stem)-1]
				ok = ok && (c == 's' || c == 't')
			}
			if ok {
				return stem
			}
			return b
		}
	}
	return b
}
