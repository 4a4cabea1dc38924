import re, collections, sys
out = sys.argv[1]
d = collections.defaultdict(list); mode = None
for l in open(out + '/cuda.txt'):
    m = re.match(r'== cuda (\S+)', l)
    if m: mode = m.group(1); continue
    f = l.split()
    if len(f) >= 3 and f[0] == 'bench': d[(f[1], mode)].append(float(f[2]))
    elif l.startswith('cuda t'): print(l.strip()[:300])
for n in sorted({k[0] for k in d}):
    print(n, ' '.join('%s=%s' % (m, '/'.join('%.1f' % x for x in d[(n, m)])) for m in ['native', '1', '4', '6'] if d[(n, m)]))
