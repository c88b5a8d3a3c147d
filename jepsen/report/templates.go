package report

// pageCSS is the stylesheet shared by the report and the index page.
const pageCSS = `
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin: 0 0 .3em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fff0f0; }
code, .mono { font-family: ui-monospace, "Liberation Mono", Menlo, Consolas, monospace; font-size: .9em; }
.verdict { display: inline-block; padding: .15em .6em; border-radius: .25em; color: #fff; font-weight: bold; letter-spacing: .05em; }
.verdict.valid { background: #1a7f37; }
.verdict.invalid { background: #cf222e; }
.verdict.unknown { background: #6e7781; }
.yes { color: #1a7f37; font-weight: bold; }
.no { color: #cf222e; font-weight: bold; }
.error { color: #cf222e; }
.muted { color: #6e7781; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .35em; vertical-align: -.1em; opacity: .6; border: 1px solid #999; }
ul.errors { margin: 0; padding-left: 1.1em; }
ul.errors li { word-break: break-word; }
figure { margin: 1em 0; }
figcaption { font-size: .85em; color: #555; }
svg.plot { display: block; width: 100%; height: auto; max-width: 1100px; }
svg.plot text { font-family: "Liberation Sans", Arial, Helvetica, sans-serif !important; }
iframe.linearizability { width: 100%; height: 600px; border: 1px solid #ddd; }
`

// reportTemplate is the HTML of one run's report (see reportView).
const reportTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>` + pageCSS + `</style>
</head>
<body>
<header>
<h1><span class="verdict {{.VerdictClass}}" id="verdict">{{.Verdict}}</span> {{.RunName}}</h1>
<div class="muted">{{.Title}} · report generated {{.Generated}}</div>
{{- if .HarnessError}}
<p class="error" id="harness-error"><strong>Harness error:</strong> {{.HarnessError}}</p>
{{- end}}
</header>

<h2>Run</h2>
<table id="meta">
{{- range .Meta}}
<tr><th>{{.Key}}</th><td>{{.Value}}</td></tr>
{{- end}}
</table>

<h2>Checkers</h2>
{{- if .Checkers}}
<table id="checkers">
<tr><th>checker</th><th>valid</th><th>counts</th><th>first errors</th><th>note</th></tr>
{{- range .Checkers}}
<tr class="checker{{if not .Valid}} bad{{end}}">
<td><strong>{{.Name}}</strong></td>
<td>{{if .Valid}}<span class="yes">valid</span>{{else}}<span class="no">INVALID</span>{{end}}</td>
<td class="mono">{{range .Counts}}{{.Key}}={{.Value}}<br>{{end}}</td>
<td>{{if .Errors}}<ul class="errors">{{range .Errors}}<li class="mono">{{.}}</li>{{end}}{{if .MoreCount}}<li class="muted">… {{.MoreCount}} more in results.json</li>{{end}}</ul>{{end}}</td>
<td>{{.Note}}</td>
</tr>
{{- end}}
</table>
{{- else}}
<p class="muted">No checker results.</p>
{{- end}}

<h2>Operations and faults</h2>
<table id="ops">
<tr><th>kind</th><th class="num">ok</th><th class="num">fail</th><th class="num">info</th>{{if .Ops.Total.Other}}<th class="num">other</th>{{end}}<th class="num">total</th></tr>
{{- $other := .Ops.Total.Other}}
{{- range .Ops.Rows}}
<tr><td>{{.Kind}}</td><td class="num">{{.OK}}</td><td class="num">{{.Fail}}</td><td class="num">{{.Info}}</td>{{if $other}}<td class="num">{{.Other}}</td>{{end}}<td class="num">{{.Total}}</td></tr>
{{- end}}
{{- with .Ops.Total}}
<tr><th>{{.Kind}}</th><th class="num">{{.OK}}</th><th class="num">{{.Fail}}</th><th class="num">{{.Info}}</th>{{if $other}}<th class="num">{{.Other}}</th>{{end}}<th class="num">{{.Total}}</th></tr>
{{- end}}
</table>
{{- if .Faults}}
<table id="faults">
<tr><th>fault</th><th class="num">count</th><th class="num">seconds active</th><th class="num">injection errors</th></tr>
{{- range .Faults}}
<tr><td><span class="swatch" style="{{.Color}}"></span>{{.Kind}}</td><td class="num">{{.Count}}</td><td class="num">{{.Seconds}}</td><td class="num">{{.Errors}}</td></tr>
{{- end}}
</table>
{{- else}}
<p class="muted">No faults were injected.</p>
{{- end}}

<h2>Plots</h2>
{{- range $i, $p := .Plots}}
<figure id="{{$p.ID}}">
{{- if $p.SVG}}
{{index $.SVGs $i}}
{{- else if $p.Err}}
<p class="error">{{$p.Title}}: plot failed: {{$p.Err}}</p>
{{- else}}
<p class="muted">{{$p.Title}}: nothing to plot.</p>
{{- end}}
<figcaption>{{$p.Caption}}</figcaption>
</figure>
{{- end}}

<h2>Nemesis timeline</h2>
{{- if .Timeline}}
<table id="timeline">
<tr><th>kind</th><th class="num">start s</th><th class="num">end s</th><th class="num">length s</th><th>nodes</th><th>description</th><th>error</th></tr>
{{- range .Timeline}}
<tr class="fault{{if .Error}} bad{{end}}"><td><span class="swatch" style="{{.Color}}"></span>{{.Kind}}</td><td class="num">{{.Start}}</td><td class="num">{{.End}}</td><td class="num">{{.Length}}</td><td>{{.Nodes}}</td><td>{{.Description}}</td><td class="error">{{.Error}}</td></tr>
{{- end}}
</table>
{{- else}}
<p class="muted">No faults.</p>
{{- end}}

{{- if .Replicas}}
<h2>Replicas</h2>
<table id="replicas">
<tr><th>node</th><th class="num">commit</th><th class="num">first</th><th class="num">entries</th><th>problem</th></tr>
{{- range .Replicas}}
<tr{{if .Problem}} class="bad"{{end}}><td>n{{.Node}}</td><td class="num">{{.Commit}}</td><td class="num">{{.First}}</td><td class="num">{{len .Entries}}</td><td class="error">{{.Problem}}</td></tr>
{{- end}}
</table>
{{- end}}

<h2>Files</h2>
<ul id="files">
{{- range .Files}}
<li><a href="{{.Href}}">{{.Name}}</a> <span class="muted">({{.Size}})</span></li>
{{- end}}
{{- if .Linearizability}}
<li><a href="{{.Linearizability}}">linearizability.html</a> <span class="muted">(porcupine visualization)</span></li>
{{- end}}
</ul>
{{- if .NodeLogs}}
<p>Node logs:</p>
<ul id="node-logs">
{{- range .NodeLogs}}
<li><a href="{{.Href}}">{{.Name}}</a> <span class="muted">({{.Size}})</span></li>
{{- end}}
</ul>
{{- end}}

{{- if .Linearizability}}
<h2>Linearizability</h2>
<iframe class="linearizability" src="{{.Linearizability}}" loading="lazy" title="porcupine linearizability visualization"></iframe>
{{- end}}
</body>
</html>
`

// indexTemplate is the HTML of the run index (see indexView).
const indexTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>raftmq chaos runs</title>
<style>` + pageCSS + `</style>
</head>
<body>
<h1>raftmq chaos runs</h1>
<p class="muted">{{len .Runs}} runs under <code>{{.Root}}</code>, newest first.</p>
{{- if .Runs}}
<table id="runs">
<tr><th>verdict</th><th>date</th><th>run</th><th>workload</th><th>nemesis</th><th class="num">seed</th><th>mutant</th><th class="num">ops</th><th class="num">faults</th><th>failed checkers</th><th>files</th></tr>
{{- range .Runs}}
<tr class="run{{if eq .Verdict "invalid"}} bad{{end}}">
<td><span class="verdict {{.Verdict}}">{{upper .Verdict}}</span></td>
<td class="mono">{{if not .Time.IsZero}}{{.Time.Format "2006-01-02 15:04:05"}}{{end}}</td>
<td><a href="{{runURL .RelPath}}">{{.RelPath}}</a></td>
<td>{{.Meta.Workload}}</td>
<td>{{join .Meta.Nemesis ", "}}</td>
<td class="num">{{.Meta.Seed}}</td>
<td>{{.Meta.Mutant}}</td>
<td class="num">{{.Ops}}</td>
<td class="num">{{.Faults}}</td>
<td>{{join .FailedCheckers ", "}}{{if .HarnessError}} <span class="error">harness error: {{.HarnessError}}</span>{{end}}{{if .Err}} <span class="error">{{.Err}}</span>{{end}}</td>
<td><a href="{{runURL .RelPath}}">report</a>{{if .HasResults}} · <a href="{{runURL .RelPath}}results.json">results</a>{{end}} · <a href="{{runURL .RelPath}}history.jsonl">history</a></td>
</tr>
{{- end}}
</table>
{{- end}}
</body>
</html>
`
