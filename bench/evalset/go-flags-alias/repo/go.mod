module example.com/buildcmd

go 1.19
