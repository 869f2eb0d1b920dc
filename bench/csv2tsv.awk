# CSV (RFC 4180, as ixlbench writes it: a field that holds a comma or a quote is in double
# quotes, inner quotes doubled) to tab-separated fields, one record per line, so that the
# benchmark scripts can pick columns with awk -F'\t' by position: ixlbench's path column may be
# "sysv,cma" (UCX over shared memory). Fields must not hold tabs or line breaks (ixlbench's
# never do). Plain POSIX awk (mawk included).
#   awk -f bench/csv2tsv.awk file.csv | awk -F'\t' '$1 == "sweep" { print $14 }'
{
    line = $0
    out = ""
    n = 0
    for (;;) {
        if (substr(line, 1, 1) == "\"") {
            f = ""
            i = 2
            len = length(line)
            while (i <= len) {
                c = substr(line, i, 1)
                if (c == "\"") {
                    if (substr(line, i + 1, 1) == "\"") {
                        f = f "\""
                        i += 2
                        continue
                    }
                    i++
                    break
                }
                f = f c
                i++
            }
            line = substr(line, i)
        } else {
            k = index(line, ",")
            if (k == 0) {
                f = line
                line = ""
            } else {
                f = substr(line, 1, k - 1)
                line = substr(line, k)
            }
        }
        out = n++ ? out "\t" f : f
        if (line == "")
            break
        line = substr(line, 2) # the comma
        if (line == "") {      # a last, empty field
            out = out "\t"
            break
        }
    }
    print out
}
