package corpus

import (
	"strings"
	"testing"
)

// TestLangTextWinsOverAttribute: the record's language is the one detected in the main text
// (whatlanggo, through go-trafilatura); a <html lang> that disagrees does not change it, and
// --languages filters by the detected language, not by the attribute.
func TestLangTextWinsOverAttribute(t *testing.T) {
	de := strings.Repeat("Der Fluss fließt durch die Stadt und die Kinder spielen am Ufer, während die Eltern im Garten sitzen und über das Wetter sprechen. ", 6)
	ru := strings.Repeat("Сегодня в городе было очень холодно, и мы решили остаться дома, чтобы читать книги и пить горячий чай. Это был хороший вечер. ", 6)
	fr := strings.Repeat("La rivière traverse la ville et les enfants jouent sur la rive pendant que les parents sont assis dans le jardin et parlent du temps. ", 6)
	cases := []struct {
		name, attr, body, want string
	}{
		{"german page says en", "en", de, "de"},
		{"russian page says de", "de", ru, "ru"},
		{"french page says es", "es", fr, "fr"},
		{"german page says de", "de", de, "de"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page := genPage("Seite", []string{c.body}, pageOpts{lang: c.attr})
			j := htmlJob("http://h1.sim.test/" + c.want)
			rec := testExtractor(Filters{}).analyze(&j, []byte(page)).rec
			if rec.Rejected != "" || rec.Language != c.want {
				t.Fatalf("language %q (rejected %q), want %q from the text, not %q from <html lang>", rec.Language, rec.Rejected, c.want, c.attr)
			}
			j = htmlJob("http://h1.sim.test/" + c.want)
			rec = testExtractor(Filters{Languages: []string{c.attr}}).analyze(&j, []byte(page)).rec
			if c.attr != c.want && rec.Rejected != RejectLanguage {
				t.Errorf("--languages %s kept a %s page that only claims %s (rejected %q)", c.attr, c.want, c.attr, rec.Rejected)
			}
		})
	}
}
