"""Compares the outcome of each CuPy test natively and through vgpu
(run-cupy-suite.sh's logs): per group, the tests run on both sides and
those whose outcome differs, grouped by test class."""
import collections
import re
import sys

RESULT = re.compile(r'^(tests/\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+\[')


def outcomes(path):
    found = {}
    try:
        with open(path, errors='replace') as log:
            for line in log:
                match = RESULT.match(line)
                if match:
                    found[match.group(1)] = match.group(2)
    except FileNotFoundError:
        pass
    return found


def main(out, groups):
    for group in groups:
        native = outcomes(f'{out}/native-{group}.log')
        vgpu = outcomes(f'{out}/vgpu-{group}.log')
        both = [t for t in native if t in vgpu]
        differ = [t for t in both if native[t] != vgpu[t]]
        print(f'{group}: {len(both)} tests run on both sides '
              f'(native ran {len(native)}, vgpu {len(vgpu)}), {len(differ)} differ')
        by_class = collections.Counter(
            (t.split('::')[0] + '::' + t.split('::')[1].split('_param')[0], native[t], vgpu[t])
            for t in differ)
        for (name, was, now), count in by_class.most_common():
            print(f'  {count:5d} {was} -> {now} {name}')


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
