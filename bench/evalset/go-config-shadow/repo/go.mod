module example.com/appconfig

go 1.19
