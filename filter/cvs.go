package filter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cvsDefault is rsync's default list of CVS ignores (--cvs-exclude).
const cvsDefault = "RCS SCCS CVS CVS.adm RCSLOG cvslog.* tags TAGS .make.state .nse_depinfo *~ #* .#* ,* _$* *$ *.old *.bak *.BAK *.orig *.rej .del-* *.a *.olb *.o *.obj *.so *.exe *.Z *.elc *.ln core .svn/ .git/ .hg/ .bzr/"

// addCVS adds, in the place of a "-C" rule ru, rsync's CVS excludes: the
// default list, then the names in $HOME/.cvsignore, then those in
// $CVSIGNORE, split on whitespace, "!" clearing what came before.
func addCVS(list *[]rule, ru rule) error {
	t := tmpl{noPrefix: true, wordSplit: true, cvs: true, include: ru.include, abs: ru.abs, sides: ru.sides}
	var cvs []rule
	var r Rules
	add := func(words, from string) error {
		in := &fileCtx{name: from}
		for _, w := range strings.Fields(words) {
			if err := r.addTok(&cvs, w, t, in); err != nil {
				return fmt.Errorf("%s: %q: %w", from, w, err)
			}
		}
		return nil
	}
	if err := add(cvsDefault, "the default CVS ignores"); err != nil {
		return err
	}
	if home := os.Getenv("HOME"); home != "" {
		name := filepath.Join(home, ".cvsignore")
		if data, err := readFile(name); err == nil {
			if err := add(string(data), name); err != nil {
				return err
			}
		}
	}
	if err := add(os.Getenv("CVSIGNORE"), "$CVSIGNORE"); err != nil {
		return err
	}
	*list = append(*list, cvs...)
	return nil
}
