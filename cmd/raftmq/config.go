package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Config files. A command that takes --config FILE reads a YAML mapping
// whose keys are the command's own flag names (kebab-case) and sets each
// flag through its pflag.Value, exactly as if it were given on the command
// line, unless the command line gave it (the command line wins). So every
// flag is settable from the file by construction, with the same parsing
// and the same validation. A YAML sequence sets a list flag (--peer,
// --peers); an unknown key, a key given twice and a list for a flag that
// takes one value are errors. A command may also accept other names for
// some keys (configAlias: RocketMQ's broker.conf names, in RocketMQ's
// units).

// configAlias is another name for a flag in config files, with the
// conversion of its value into the flag's syntax.
type configAlias struct {
	flag    string
	unit    string // what the alias's value is, for the example file
	example string // the alias's value for the flag's default
	convert func(string) (string, error)
}

// configOptions describe a command's config file.
type configOptions struct {
	title    string                 // first line of the example file
	intro    []string               // more lines for the example's header
	sections []configSection        // how the example groups the keys
	aliases  map[string]configAlias // other names for keys
}

// configSection names a group of keys in the example file; keys not in
// any section are listed under "other" at the end.
type configSection struct {
	title string
	keys  []string
}

// configInherited are the flags of parent commands a config file may set.
var configInherited = []string{"verbose"}

// configFlags returns the flags a config file may set, by name: the
// command's own flags but --config, --print-config and --help, and the
// inherited ones in configInherited.
func configFlags(cmd *cobra.Command) map[string]*pflag.Flag {
	out := map[string]*pflag.Flag{}
	cmd.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "config", "print-config", "help":
			return
		}
		out[f.Name] = f
	})
	for _, n := range configInherited {
		if f := cmd.InheritedFlags().Lookup(n); f != nil {
			out[n] = f
		}
	}
	return out
}

// addConfigFlags gives cmd --config FILE (applied before its RunE, after
// the command line is parsed) and --print-config (prints the example file
// and exits).
func addConfigFlags(cmd *cobra.Command, opts configOptions) {
	var path string
	var printExample bool
	cmd.Flags().StringVar(&path, "config", "", "read settings from this YAML file: keys are this command's flag names (see --print-config); flags on the command line win")
	cmd.Flags().BoolVar(&printExample, "print-config", false, "print an example config file with every key and its default, and exit")
	prevPre, prevRun := cmd.PreRunE, cmd.RunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if printExample {
			return nil
		}
		if path != "" {
			if err := applyConfigFile(c, path, opts.aliases); err != nil {
				return usageError(err)
			}
		}
		if prevPre != nil {
			return prevPre(c, args)
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if printExample {
			_, err := c.OutOrStdout().Write([]byte(exampleConfig(c, opts)))
			return err
		}
		return prevRun(c, args)
	}
}

// applyConfigFile reads path and sets cmd's flags from it: YAML, or Java
// properties (RocketMQ's broker.conf) when the file is one
// (isProperties).
func applyConfigFile(cmd *cobra.Command, path string, aliases map[string]configAlias) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if isProperties(path, data) {
		ignored, err := applyProperties(cmd, data, aliases)
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		if len(ignored) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "raftmq: config %s: ignoring %d keys raftmq does not use: %s\n", path, len(ignored), strings.Join(ignored, ", "))
		}
		return nil
	}
	if err := applyConfig(cmd, data, aliases); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// isProperties reports whether a config file is Java properties text
// (key=value lines) rather than YAML: its name ends in .conf or
// .properties, or it is not a YAML mapping but has a key=value line.
func isProperties(path string, data []byte) bool {
	if strings.HasSuffix(path, ".conf") || strings.HasSuffix(path, ".properties") {
		return true
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line[0] != '#' && line[0] != '!' && strings.Contains(line, "=") {
			return true
		}
	}
	return false
}

// applyProperties sets cmd's flags from Java properties text, as RocketMQ's
// broker.conf: key=value (or key: value) lines, # and ! comments. A key
// is an alias (RocketMQ's name) or a flag name; other keys are returned,
// sorted, and do not stop the rest. A bad value or a key given twice is
// an error. Flags set on the command line win.
func applyProperties(cmd *cobra.Command, data []byte, aliases map[string]configAlias) (ignored []string, err error) {
	flags := configFlags(cmd)
	fromCLI := map[string]bool{}
	for name, f := range flags {
		fromCLI[name] = f.Changed
	}
	setBy := map[string]string{}
	for n, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: %q: want key=value", n+1, line)
		}
		key, val := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		name, alias := key, configAlias{}
		if a, ok := aliases[key]; ok {
			name, alias = a.flag, a
		}
		f, ok := flags[name]
		if !ok {
			if !slices.Contains(ignored, key) {
				ignored = append(ignored, key)
			}
			continue
		}
		if prev, dup := setBy[name]; dup {
			return nil, fmt.Errorf("line %d: key %q sets %s, which %q already set", n+1, key, name, prev)
		}
		setBy[name] = key
		if fromCLI[name] {
			continue
		}
		if err := setFlag(f, &yaml.Node{Kind: yaml.ScalarNode, Value: val, Line: n + 1}, alias); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n+1, key, err)
		}
	}
	slices.Sort(ignored)
	return ignored, nil
}

// applyConfig sets cmd's flags from the YAML document data; flags already
// set on the command line are left alone.
func applyConfig(cmd *cobra.Command, data []byte, aliases map[string]configAlias) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of keys to values (key: value)", root.Line)
	}
	flags := configFlags(cmd)
	fromCLI := map[string]bool{}
	for name, f := range flags {
		fromCLI[name] = f.Changed
	}
	setBy := map[string]string{} // flag -> the key that set it
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		name, alias := key, configAlias{}
		if a, ok := aliases[key]; ok {
			name, alias = a.flag, a
		}
		f, ok := flags[name]
		if !ok {
			return fmt.Errorf("line %d: unknown key %q (did you mean %q?)", k.Line, key, closestKey(key, flags, aliases))
		}
		if prev, dup := setBy[name]; dup {
			if prev == key {
				return fmt.Errorf("line %d: key %q given twice", k.Line, key)
			}
			return fmt.Errorf("line %d: key %q sets %s, which %q already set", k.Line, key, name, prev)
		}
		setBy[name] = key
		if fromCLI[name] {
			continue
		}
		if err := setFlag(f, v, alias); err != nil {
			return fmt.Errorf("line %d: %s: %w", v.Line, key, err)
		}
	}
	return nil
}

// setFlag sets f from the YAML value v: a scalar through Value.Set (after
// the alias's conversion), a sequence through SliceValue.Replace.
func setFlag(f *pflag.Flag, v *yaml.Node, alias configAlias) error {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias // *anchor: the anchored value
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return errors.New("no value (remove the key to keep the default)")
		}
		val := v.Value
		if alias.convert != nil {
			var err error
			if val, err = alias.convert(val); err != nil {
				return err
			}
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			// One value for a list: the list of that one value, as in the
			// file, not appended to the default.
			if err := sv.Replace(nil); err != nil {
				return err
			}
		}
		if err := f.Value.Set(val); err != nil {
			return fmt.Errorf("%q: %w", val, err)
		}
	case yaml.SequenceNode:
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok || alias.convert != nil {
			return fmt.Errorf("takes one value, not a list (line %d)", v.Line)
		}
		vals := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a list item must be a single value", it.Line)
			}
			vals = append(vals, it.Value)
		}
		if err := sv.Replace(vals); err != nil {
			return err
		}
	default:
		return errors.New("want a value or a list, not a mapping")
	}
	f.Changed = true
	return nil
}

// closestKey returns the known key (flag name or alias) nearest to key by
// edit distance, case-insensitively.
func closestKey(key string, flags map[string]*pflag.Flag, aliases map[string]configAlias) string {
	var names []string
	for n := range flags {
		names = append(names, n)
	}
	for n := range aliases {
		names = append(names, n)
	}
	slices.Sort(names)
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// exampleConfig renders the example config file of cmd: every settable
// flag but the hidden ones, commented out with its default and preceded
// by its help, grouped as opts.sections says, then the aliases.
func exampleConfig(cmd *cobra.Command, opts configOptions) string {
	flags := configFlags(cmd)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", opts.title)
	for _, l := range opts.intro {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	b.WriteString("#\n# Lines starting with \"##\" explain; each \"# key: value\" line is a setting\n" +
		"# at its default, commented out: uncomment it and change the value. Keys are\n" +
		"# the command's flag names; a flag given on the command line wins over the\n" +
		"# file; an unknown key is an error.\n")
	done := map[string]bool{}
	section := func(title string, keys []string) {
		var fs []*pflag.Flag
		for _, k := range keys {
			if f, ok := flags[k]; ok && !f.Hidden && !done[k] {
				fs = append(fs, f)
				done[k] = true
			}
		}
		if len(fs) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n## ---- %s ----\n", title)
		for _, f := range fs {
			b.WriteString("\n")
			for _, l := range wrapText(f.Usage, 76) {
				fmt.Fprintf(&b, "## %s\n", l)
			}
			fmt.Fprintf(&b, "# %s: %s\n", f.Name, yamlDefault(f))
		}
	}
	for _, s := range opts.sections {
		section(s.title, s.keys)
	}
	var rest []string
	for n := range flags {
		rest = append(rest, n)
	}
	slices.Sort(rest)
	title := "other"
	if len(opts.sections) == 0 {
		title = "settings"
	}
	section(title, rest)
	if len(opts.aliases) > 0 {
		b.WriteString("\n## ---- RocketMQ names ----\n##\n" +
			"## These broker.conf names are accepted too, in RocketMQ's units; each sets\n" +
			"## the key after the arrow (give one or the other, not both):\n##\n")
		var names []string
		for n := range opts.aliases {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			a := opts.aliases[n]
			fmt.Fprintf(&b, "##   %-38s %-28s -> %s\n", n+": "+a.example, "("+a.unit+")", a.flag)
		}
	}
	return b.String()
}

// yamlDefault renders f's default value as YAML.
func yamlDefault(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "stringArray", "stringSlice":
		if f.DefValue == "[]" {
			return "[]"
		}
		return f.DefValue
	case "duration":
		if d, err := time.ParseDuration(f.DefValue); err == nil {
			return shortDuration(d)
		}
	case "string":
		out, err := yaml.Marshal(f.DefValue)
		if err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return f.DefValue
}

// shortDuration formats d as time.Duration.String does, without the zero
// minutes and seconds it appends ("72h", not "72h0m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wrapText splits s into lines of at most width bytes at spaces.
func wrapText(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
