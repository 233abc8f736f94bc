module kubedevice.test/cluster/image

go 1.26.0
