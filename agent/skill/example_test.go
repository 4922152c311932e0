package skill_test

import (
	"fmt"
	"testing/fstest"

	"github.com/valetkit/valet/agent/skill"
)

func Example() {
	skills := fstest.MapFS{ // os.DirFS("skills") or an embed.FS in a program
		"research/SKILL.md": {Data: []byte(`---
name: research
description: Finds facts on the web and cites them.
  Use for questions that need sources.
tools: [web_search, fetch_page]
model: smart
---
Search, read two sources, answer with links.
`)},
		"writer/SKILL.md": {Data: []byte(`---
name: writer
description: Drafts emails.
allowed-tools: draft_email, Read
license: MIT
---
Write plainly.
`)},
	}
	set, err := skill.Load(skills)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(set.Index())

	w, _ := set.Get("writer")
	fmt.Printf("%s: tools %q, body %q\n", w.Name, w.Tools, w.Body)

	err = set.Check(
		func(tool string) bool { return tool != "fetch_page" },
		func(model string) bool { return model == "smart" },
	)
	fmt.Println(err)
	// Output:
	// - research: Finds facts on the web and cites them. Use for questions that need sources.
	// - writer: Drafts emails.
	// writer: tools ["draft_email" "Read"], body "Write plainly."
	// skill: research/SKILL.md: skill "research" lists tool "fetch_page", which does not exist
}
