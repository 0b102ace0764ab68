# Medians across -count runs of Go benchmark lines: for every benchmark and
# every reported unit, the median of the values the runs gave.
# Usage: go test -bench ... -count 5 | awk -f docs/benchmedian.awk
/^Benchmark/ {
	name = $1
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	for (i = 3; i < NF; i += 2) {
		key = name SUBSEP $(i + 1)
		if (!(key in cnt)) { units[name] = units[name] SUBSEP $(i + 1) }
		vals[key, ++cnt[key]] = $i
	}
}
END {
	for (j = 1; j <= n; j++) {
		name = order[j]
		line = name
		m = split(substr(units[name], 2), us, SUBSEP)
		for (u = 1; u <= m; u++) {
			key = name SUBSEP us[u]
			c = cnt[key]
			for (a = 1; a <= c; a++) v[a] = vals[key, a] + 0
			for (a = 2; a <= c; a++) { x = v[a]; b = a - 1; while (b >= 1 && v[b] > x) { v[b + 1] = v[b]; b-- } v[b + 1] = x }
			med = (c % 2) ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
			line = line sprintf("  %s=%g", us[u], med)
		}
		print "median of " cnt[name SUBSEP us[1]] ": " line
	}
}
