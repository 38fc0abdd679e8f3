# Web search flow sizes, the distribution published with the DCTCP study (Alizadeh et
# al., SIGCOMM 2010).  Columns: flow size in bytes, cumulative probability.  Sizes
# between two points are interpolated linearly (uniform within each segment).
0 0
10000 0.15
20000 0.2
30000 0.3
50000 0.4
80000 0.53
200000 0.6
1000000 0.7
2000000 0.8
5000000 0.9
10000000 0.97
30000000 1
