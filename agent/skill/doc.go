// Package skill reads skills: SKILL.md files, each a YAML front matter
// and a markdown body, laid out as the Agent Skills format does
// (agentskills.io). A coordinator is told only each skill's name and
// description ([Set.Index]); a specialist started for a skill gets its
// body as instructions and exactly the tools it lists.
//
// # A SKILL.md
//
//	---
//	name: hotel-research             # required: lowercase letters, digits, single hyphens; the directory's name
//	description: >                   # required: what it does and when to use it (≤ 1024 characters)
//	  Finds and compares hotels. Use when the user asks where to stay.
//	triggers: [hotel, where to stay] # optional phrases
//	tools: [web_search, fetch_page]  # the specialist's only tools; "allowed-tools" is a synonym
//	model: smart                     # optional, a name agent.ModelRouter knows
//	license: MIT                     # other keys are ignored
//	---
//	# Hotel research
//	Compare at least three hotels ...
//
// The tool list is a YAML list or, as published Agent Skills files write
// "allowed-tools", one string of names separated by spaces or commas
// ("Read, Grep" or "Bash(git log:*) Read": a separator inside
// parentheses does not split). A skill that lists no tools gets none.
//
// # Loading
//
//	set, err := skill.Load(os.DirFS("skills")) // or an embed.FS: skills/ in it is searched
//	fmt.Print(set.Index())                      // "- hotel-research: Finds and compares hotels. ..."
//	s, ok := set.Get("hotel-research")
//	err = set.Check(toolExists, modelExists)    // done by the code that runs skills
//
// [Load] searches the whole fs.FS: each directory holding a SKILL.md is a
// skill (its subdirectories are its resources and are not searched). It
// refuses, with every problem found joined and each naming its file
// ([*Error], [ErrInvalid], [ErrDuplicate]): a file without front matter
// or with broken YAML, a missing name or description, a name that is not
// the format's or not its directory's, two skills of one name, a value
// that is not one line of text, text that is not UTF-8, a file over
// [MaxFileSize] (refused unread past the cap) or a body over
// [MaxBodySize]. [Set.Check] reports the tools and models a skill names
// that do not exist ([ErrUnknownTool], [ErrUnknownModel]).
//
// A SKILL.md may come from a third party. Its description reaches the
// coordinator's prompt through Index on one line, its line breaks and
// control characters gone, so it cannot add an entry of its own; the body
// keeps its lines, written with "\n", control characters replaced and
// bidirectional controls dropped. Neither is made harmless as
// instructions: load only skills you would put in a prompt yourself.
package skill
